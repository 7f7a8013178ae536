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

"""A real FUSE mount of the emulator for functional tests."""

import os
import shutil
import subprocess
import sys
import tempfile

import fixtures

from rdt_virt.emulator import launcher
from tests import base
from tests.functional import matrix


class EmulatorFixture(fixtures.Fixture):
    """Mount the emulator on a temporary directory; unmount on cleanup.

    :param kernel: kernel spec (default: ``RDT_VIRT_TEST_KERNEL`` or the
        newest release).
    """

    def __init__(self, profile='reference', kernel=None, **kwargs):
        super().__init__()
        self.profile = profile
        self.kernel = kernel or matrix.default_kernel()
        self.kwargs = kwargs

    def _setUp(self):
        self.mountpoint = tempfile.mkdtemp(prefix='resctrl-')
        self.addCleanup(shutil.rmtree, self.mountpoint, True)
        self.handle = launcher.mount(self.mountpoint, self.profile,
                                     kernel=self.kernel, **self.kwargs)
        self.addCleanup(self.handle.stop)
        self.client = self.handle.client


class EmulatorTestCase(base.TestCase):
    """Tests against a mounted emulator (root, /dev/fuse, libfuse3).

    ``profile`` and ``kernel`` say what it emulates; scenarios from
    :func:`tests.functional.matrix.scenarios` set both.
    """

    profile = 'reference'
    #: Kernel spec; None: ``RDT_VIRT_TEST_KERNEL`` or the newest release.
    kernel = None
    #: Further arguments of :func:`launcher.mount`.
    mount_kwargs = {}

    def setUp(self):
        super().setUp()
        self.require_fuse()
        self.emulator = self.useFixture(EmulatorFixture(
            self.profile, self.kernel, **self.mount_kwargs))
        self.root = self.emulator.mountpoint
        self.client = self.emulator.client

    def path(self, *parts):
        return os.path.join(self.root, *parts)

    def read(self, *parts):
        with open(self.path(*parts)) as f:
            return f.read()

    def task_ids(self, *parts):
        """The ids of a ``tasks`` file, one a line.

        Not a substring of the text: "123\\n" is in "4123\\n".
        """
        return [int(line) for line in self.read(*parts).split()]

    def write(self, rel, data):
        """One write() system call, as ``echo`` or libvirt would do."""
        fd = os.open(self.path(rel), os.O_WRONLY | os.O_TRUNC)
        try:
            return os.write(fd, data.encode())
        finally:
            os.close(fd)

    def assertErrno(self, err, func, *args):
        e = self.assertRaises(OSError, func, *args)
        self.assertEqual(err, e.errno, e)
        return self.read('info', 'last_cmd_status')

    def spawn(self, code, cpu=None):
        """A Python child process running *code*; killed on cleanup."""
        if cpu is not None:
            code = 'import os\nos.sched_setaffinity(0, {%d})\n%s' % (cpu,
                                                                     code)
        proc = subprocess.Popen([sys.executable, '-c', code])
        self.addCleanup(proc.wait)
        self.addCleanup(proc.kill)
        return proc
