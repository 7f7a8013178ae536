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

"""Threads read from a procfs tree."""

import os

import fixtures

from rdt_virt.emulator import threads
from tests import base


def _stat(tid, ppid, utime, stime, cpu):
    # pid (comm) state ppid ... utime(14) stime(15) ... processor(39)
    fields = ['S', str(ppid)] + ['0'] * 9 + [str(utime), str(stime)]
    fields += ['0'] * (36 - len(fields)) + [str(cpu)]
    return '%d (qemu (x) y) %s\n' % (tid, ' '.join(fields))


class ProcThreadsTest(base.TestCase):

    def setUp(self):
        super(ProcThreadsTest, self).setUp()
        self.proc = self.useFixture(fixtures.TempDir()).path
        self.source = threads.ProcThreads(self.proc)

    def add(self, pid, tid, ppid=1, utime=0, stime=0, cpu=0):
        task = os.path.join(self.proc, str(pid), 'task', str(tid))
        os.makedirs(task)
        with open(os.path.join(task, 'stat'), 'w') as f:
            f.write(_stat(tid, ppid, utime, stime, cpu))

    def test_snapshot_and_tids_agree(self):
        self.add(10, 10, ppid=1, utime=100, stime=50, cpu=1)
        self.add(10, 11, ppid=1)
        self.add(20, 20, ppid=10)
        os.makedirs(os.path.join(self.proc, 'self'))
        snap = self.source.snapshot()
        self.assertEqual({10: 10, 11: 10, 20: 20}, self.source.tids())
        self.assertEqual({t: s.tgid for t, s in snap.items()},
                         self.source.tids())
        tick_ns = 10 ** 9 // os.sysconf('SC_CLK_TCK')
        self.assertEqual((10, 1, 150 * tick_ns, 1),
                         (snap[10].tgid, snap[10].ppid, snap[10].cpu_ns,
                          snap[10].cpu))
        self.assertEqual(10, snap[20].ppid)

    def test_a_process_gone_between_listings_is_skipped(self):
        self.add(10, 10)
        # A pid directory without its task directory: it exited.
        os.makedirs(os.path.join(self.proc, '30'))
        self.assertEqual({10: 10}, self.source.tids())
        self.assertEqual([10], list(self.source.snapshot()))

    def write(self, text, *parts):
        path = os.path.join(self.proc, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)

    def test_the_creator_of_a_process_not_of_a_thread(self):
        # Process 10 has threads 10 and 11; its thread 11 forked 20.
        for tid in (10, 11):
            self.add(10, tid)
            self.write('', '10', 'task', str(tid), 'children')
        self.write('20 ', '10', 'task', '11', 'children')
        self.write(_stat(20, 10, 0, 0, 0), '20', 'stat')
        self.assertEqual(11, self.source.creator(20, 20))
        # A thread of process 20: no children file can name it.
        read = []
        real = self.source._read
        self.source._read = lambda path: read.append(path) or real(path)
        self.assertIsNone(self.source.creator(21, 20))
        self.assertEqual([], read)
