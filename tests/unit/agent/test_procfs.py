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

"""QEMU processes and threads from a fake procfs tree."""

import os
import shutil

import fixtures

from rdt_virt.agent import procfs
from tests import base

UUID = '11111111-1111-4111-8111-111111111111'


class TestProcFS(base.TestCase):

    def setUp(self):
        super().setUp()
        self.proc = self.useFixture(fixtures.TempDir()).path
        self.pids = self.useFixture(fixtures.TempDir()).path

    def qemu(self, pid, uuid=UUID, threads=None):
        base = os.path.join(self.proc, str(pid))
        os.makedirs(os.path.join(base, 'task'))
        with open(os.path.join(base, 'cmdline'), 'wb') as f:
            f.write(b'/usr/bin/qemu-system-x86_64\0-name\0guest=i-1,debug'
                    b'-threads=on\0-uuid\0' + uuid.encode() + b'\0-S\0')
        threads = threads or {pid: 'qemu-system-x86', pid + 1: 'CPU 0/KVM',
                              pid + 2: 'CPU 1/KVM', pid + 3: 'IO iothread1',
                              pid + 4: 'worker'}
        for tid, comm in threads.items():
            self.thread(pid, tid, comm)

    def thread(self, pid, tid, comm):
        path = os.path.join(self.proc, str(pid), 'task', str(tid))
        os.makedirs(path)
        with open(os.path.join(path, 'comm'), 'w') as f:
            f.write(comm + '\n')

    def test_threads_classified(self):
        self.qemu(100)
        found = procfs.ProcFS(self.proc).instance_threads(UUID)
        self.assertEqual(100, found.pid)
        self.assertEqual({0: 101, 1: 102}, found.vcpus)
        self.assertEqual((100, 103, 104), found.others)
        self.assertEqual({100, 101, 102, 103, 104}, found.all)

    def test_runnable_time_from_schedstat(self):
        self.qemu(100)
        path = os.path.join(self.proc, '100', 'task', '101', 'schedstat')
        with open(path, 'w') as f:
            f.write('2000 500 7\n')
        fs = procfs.ProcFS(self.proc)
        # Time on a CPU plus time waiting for one.
        self.assertEqual(2500, fs.runnable_ns(100, 101))
        self.assertIsNone(fs.runnable_ns(100, 102))     # no such file
        self.assertIsNone(fs.runnable_ns(100, 999))     # gone
        with open(path, 'w') as f:
            f.write('garbage\n')
        self.assertIsNone(fs.runnable_ns(100, 101))

    def test_pid_file_first_and_checked(self):
        self.qemu(100)
        self.qemu(200, uuid='22222222-2222-4222-8222-222222222222')
        with open(os.path.join(self.pids, 'i-1.pid'), 'w') as f:
            f.write('200\n')
        fs = procfs.ProcFS(self.proc, self.pids)
        # The pid file names another domain's QEMU: the scan finds ours.
        self.assertEqual(100, fs.find_pid(UUID, 'i-1'))
        with open(os.path.join(self.pids, 'i-1.pid'), 'w') as f:
            f.write('100\n')
        fs.forget(UUID)
        self.assertEqual(100, fs.find_pid(UUID, 'i-1'))

    def test_unknown_domain(self):
        self.qemu(100)
        self.assertIsNone(procfs.ProcFS(self.proc).instance_threads(
            '33333333-3333-4333-8333-333333333333'))

    def test_hotplug_and_exit(self):
        self.qemu(100)
        fs = procfs.ProcFS(self.proc)
        fs.instance_threads(UUID)
        self.thread(100, 105, 'CPU 2/KVM')
        shutil.rmtree(os.path.join(self.proc, '100', 'task', '104'))
        found = fs.instance_threads(UUID)
        self.assertEqual({0: 101, 1: 102, 2: 105}, found.vcpus)
        self.assertEqual((100, 103), found.others)

    def test_process_gone(self):
        self.qemu(100)
        fs = procfs.ProcFS(self.proc)
        fs.instance_threads(UUID)
        shutil.rmtree(os.path.join(self.proc, '100'))
        self.assertIsNone(fs.instance_threads(UUID))

    def test_names_read_once(self):
        self.qemu(100)
        fs = procfs.ProcFS(self.proc)
        fs.instance_threads(UUID)
        # A renamed thread keeps its first classification (names are
        # read once per thread).
        with open(os.path.join(self.proc, '100', 'task', '104',
                               'comm'), 'w') as f:
            f.write('CPU 9/KVM\n')
        self.assertNotIn(9, fs.instance_threads(UUID).vcpus)

    def test_vhost_kernel_threads(self):
        self.qemu(100)
        os.makedirs(os.path.join(self.proc, '300'))
        with open(os.path.join(self.proc, '300', 'comm'), 'w') as f:
            f.write('vhost-100\n')
        os.makedirs(os.path.join(self.proc, '301'))
        with open(os.path.join(self.proc, '301', 'comm'), 'w') as f:
            f.write('kworker/0:1\n')
        self.assertEqual({100: [300]},
                         procfs.ProcFS(self.proc).vhost_threads())
