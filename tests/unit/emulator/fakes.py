# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Fake threads and clock for the emulator's model tests."""

from rdt_virt.emulator import kparse
from rdt_virt.emulator import model
from rdt_virt.emulator import threads
from rdt_virt.emulator import tree
from tests import base


class FakeThreads(object):
    """A thread source whose threads the test creates and runs."""

    def __init__(self):
        self.threads = {}
        self.creators = {}

    def add(self, tid, tgid=None, ppid=1, cpu=0, uid=0, cpu_ns=0,
            creator=None):
        self.threads[tid] = threads.ThreadSample(
            tid, tgid or tid, ppid, cpu_ns, cpu, uid, uid)
        if creator is not None:
            self.creators[tid] = creator
        return tid

    def creator(self, tid, tgid):
        return self.creators.get(tid)

    def run(self, tid, seconds, cpu=None):
        """Give *tid* CPU time (on *cpu*, else where it last ran)."""
        t = self.threads[tid]
        self.threads[tid] = t._replace(
            cpu_ns=t.cpu_ns + int(seconds * 1e9),
            cpu=t.cpu if cpu is None else cpu)

    def exit(self, tid):
        del self.threads[tid]

    def snapshot(self):
        return dict(self.threads)

    def tids(self):
        return {tid: t.tgid for tid, t in self.threads.items()}

    def lookup(self, tid):
        return self.threads.get(tid)


class FakeClock(object):
    def __init__(self, now=100.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class ModelTestCase(base.TestCase):
    """A model on a profile with fake threads 1 (init) and 100-103.

    Helpers go through :class:`tree.ResctrlTree`, so the tests exercise
    the same paths, texts and errnos as the FUSE filesystem.
    """

    profile = 'reference'
    cpus = (0, 1)
    legacy = False
    #: Kernel spec (None: the newest release, or 6.1 when ``legacy``).
    kernel = None

    def setUp(self):
        super().setUp()
        self.threads = FakeThreads()
        for tid in (1, 100, 101, 102, 103):
            self.threads.add(tid)
        self.clock = FakeClock()
        self.model = self.make_model(self.profile)
        self.tree = tree.ResctrlTree(self.model)

    def make_model(self, profile, **kwargs):
        kwargs.setdefault('online_cpus', self.cpus)
        kwargs.setdefault('legacy', self.legacy)
        kwargs.setdefault('kernel', self.kernel)
        return model.ResctrlModel(profile, self.threads, clock=self.clock,
                                  **kwargs)

    def read(self, path):
        return self.tree.read(path)

    def write(self, path, data, **ctx):
        context = tree.Context(ctx.get('uid', 0), 0, ctx.get('pid', 1))
        return self.tree.write(path, data.encode('latin-1'), context)

    def status(self):
        return self.read('/info/last_cmd_status')

    def assertFails(self, err, func, *args, **kwargs):
        """*func* raises KernelError(*err*); return last_cmd_status."""
        e = self.assertRaises(kparse.KernelError, func, *args, **kwargs)
        self.assertEqual(err, e.errno)
        return self.status()

    def assertWriteFails(self, err, status, path, data, **ctx):
        self.assertEqual(status, self.assertFails(err, self.write, path,
                                                  data, **ctx))
