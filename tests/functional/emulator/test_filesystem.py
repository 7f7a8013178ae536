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

"""The emulated resctrl through real system calls on a FUSE mount."""

import errno
import fcntl
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

from rdt_virt.emulator import kparse
from rdt_virt.emulator import launcher
from rdt_virt.emulator import profiles
from tests.functional.emulator import base

REF_SCHEMATA = '    MB:0=100;1=100\n    L3:0=7ff;1=7ff\n'


class FilesystemTest(base.EmulatorTestCase):

    def test_mount_and_layout(self):
        self.assertTrue(launcher.is_mounted(self.root))
        with open('/proc/self/mountinfo') as f:
            line = [x for x in f if ' %s ' % self.root in x][0]
        self.assertIn(' - fuse.resctrl resctrl ', line)
        self.assertIn('allow_other', line)
        self.assertEqual(['cpus', 'cpus_list', 'info', 'mode', 'mon_data',
                          'mon_groups', 'schemata', 'size', 'tasks'],
                         sorted(os.listdir(self.root)))
        self.assertEqual(REF_SCHEMATA, self.read('schemata'))
        self.assertEqual('7ff\n', self.read('info', 'L3', 'cbm_mask'))
        self.assertEqual('ok\n', self.read('info', 'last_cmd_status'))
        st = os.stat(self.path('size'))
        self.assertEqual((0o100444, 0), (st.st_mode, st.st_size))
        self.assertTrue(stat.S_ISDIR(os.stat(self.path('info')).st_mode))
        # seq_file reads: small reads continue the same text.
        fd = os.open(self.path('schemata'), os.O_RDONLY)
        self.addCleanup(os.close, fd)
        chunks = [os.read(fd, 7) for _ in range(6)]
        self.assertEqual(REF_SCHEMATA, b''.join(chunks).decode())

    def test_schemata_writes(self):
        os.mkdir(self.path('g1'))
        self.assertEqual('The mask 101 has non-consecutive 1-bits\n',
                         self.assertErrno(errno.EINVAL, self.write,
                                          'g1/schemata', 'L3:0=101\n'))
        self.assertEqual('ok\n', self.assertErrno(
            errno.EINVAL, self.write, 'g1/schemata', 'L3:7=1\n'))
        self.assertEqual(8, self.write('g1/schemata', 'MB:1=15\n'))
        self.assertEqual('    MB:0=100;1=20\n    L3:0=7ff;1=7ff\n',
                         self.read('g1', 'schemata'))
        self.assertEqual('MB value 1 out of range [10,100]\n',
                         self.assertErrno(errno.EINVAL, self.write,
                                          'g1/schemata', 'MB:0=1\n'))
        # No final newline: EINVAL and the status is left alone.
        self.assertEqual('MB value 1 out of range [10,100]\n',
                         self.assertErrno(errno.EINVAL, self.write,
                                          'g1/schemata', 'MB:0=50'))
        self.assertErrno(errno.EACCES, os.open, self.path('size'),
                         os.O_WRONLY)
        self.assertErrno(errno.EACCES, os.open, self.path('g1/newfile'),
                         os.O_WRONLY | os.O_CREAT)
        self.assertEqual('Schemata overlaps\n', self.assertErrno(
            errno.EINVAL, self.write, 'g1/mode', 'exclusive\n'))

    def test_directories(self):
        for i in range(7):
            os.mkdir(self.path('g%d' % i))
        self.assertEqual('Out of CLOSIDs\n', self.assertErrno(
            errno.ENOSPC, os.mkdir, self.path('g7')))
        self.assertErrno(errno.EEXIST, os.mkdir, self.path('g0'))
        self.assertErrno(errno.EPERM, os.mkdir, self.path('info', 'x'))
        self.assertEqual(0o555, os.stat(self.root).st_mode & 0o777)
        self.assertEqual(0o555, os.stat(self.path('info')).st_mode & 0o777)
        self.assertErrno(errno.EPERM, os.mkdir, self.path('g0', 'x'))
        self.assertErrno(errno.EPERM, os.rmdir, self.path('info'))
        self.assertErrno(errno.EPERM, os.rmdir, self.path('g0', 'mon_data'))
        os.rmdir(self.path('g6'))
        self.assertNotIn('g6', os.listdir(self.root))
        os.mkdir(self.path('g0', 'mon_groups', 'm1'), 0o777)
        self.assertEqual(['llc_occupancy', 'mbm_local_bytes',
                          'mbm_total_bytes'], sorted(os.listdir(self.path(
                              'g0/mon_groups/m1/mon_data/mon_L3_01'))))
        os.rename(self.path('g0/mon_groups/m1'),
                  self.path('g1/mon_groups/m2'))
        self.assertEqual(['m2'], os.listdir(self.path('g1/mon_groups')))
        self.assertEqual('Source must be a MON group\n', self.assertErrno(
            errno.EPERM, os.rename, self.path('g1'), self.path('g9')))
        self.assertEqual(
            'Destination must be a mon_groups subdirectory\n',
            self.assertErrno(errno.EPERM, os.rename,
                             self.path('g1/mon_groups/m2'), self.path('m2')))

    def test_listings_carry_entry_types(self):
        # As on kernfs, readdir says which entries are directories, so
        # listing groups needs no stat per entry: a group removed after
        # the listing still reads as a directory from its entry.
        os.mkdir(self.path('g1'))
        with os.scandir(self.root) as listing:
            entries = {e.name: e for e in listing}
        os.rmdir(self.path('g1'))
        self.assertTrue(entries['g1'].is_dir())
        self.assertTrue(entries['info'].is_dir())
        self.assertFalse(entries['schemata'].is_dir())
        self.assertTrue(entries['schemata'].is_file())

    def test_flock_on_the_root(self):
        # libvirt serialises its changes with flock(LOCK_EX) on the root.
        fd1 = os.open(self.root, os.O_RDONLY)
        self.addCleanup(os.close, fd1)
        fd2 = os.open(self.root, os.O_RDONLY)
        self.addCleanup(os.close, fd2)
        fcntl.flock(fd1, fcntl.LOCK_EX)
        self.assertErrno(errno.EWOULDBLOCK, fcntl.flock, fd2,
                         fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd1, fcntl.LOCK_UN)
        fcntl.flock(fd2, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def test_libvirt_sequence(self):
        # What virresctrl.c does for cachetune + memorytune + monitor.
        lock = os.open(self.root, os.O_RDONLY | os.O_CLOEXEC)
        self.addCleanup(os.close, lock)
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in os.listdir(self.root):
            if name == 'info':
                continue
            try:
                self.read(name, 'schemata')
            except OSError as e:
                self.assertIn(e.errno, (errno.ENOTDIR, errno.ENOENT), name)
        group = self.path('qemu-1-vm-vcpus_0')
        os.makedirs(group, 0o777)
        self.write('qemu-1-vm-vcpus_0/schemata', 'L3:0=100;1=100\n'
                   'MB:0=50;1=50\n')
        proc = self.spawn('import time\ntime.sleep(30)')
        self.write('qemu-1-vm-vcpus_0/tasks', str(proc.pid))
        os.makedirs(os.path.join(group, 'mon_groups', 'qemu-1-vm-vcpus_1'),
                    0o777)
        fcntl.flock(lock, fcntl.LOCK_UN)
        self.assertEqual('%d\n' % proc.pid,
                         self.read('qemu-1-vm-vcpus_0', 'tasks'))
        self.assertEqual('    MB:0=50;1=50\n    L3:0=100;1=100\n',
                         self.read('qemu-1-vm-vcpus_0', 'schemata'))
        # A number, or Unavailable while the sleeping task has not run.
        value = self.read('qemu-1-vm-vcpus_0/mon_data/mon_L3_00/'
                          'mbm_local_bytes').strip()
        self.assertTrue(value.isdigit() or value == 'Unavailable', value)
        os.rmdir(group)
        self.assertIn(proc.pid, self.task_ids('tasks'))


class TasksTest(base.EmulatorTestCase):

    def test_processes_and_threads(self):
        os.makedirs(self.path('g1', 'mon_groups', 'm1'))
        os.mkdir(self.path('g2'))
        proc = self.spawn('import time\ntime.sleep(30)')
        self.write('g1/tasks', '%d\n' % proc.pid)
        self.assertEqual('%d\n' % proc.pid, self.read('g1', 'tasks'))
        self.assertNotIn(proc.pid, self.task_ids('tasks'))
        self.write('g1/mon_groups/m1/tasks', str(proc.pid))
        self.assertEqual('%d\n' % proc.pid,
                         self.read('g1', 'mon_groups', 'm1', 'tasks'))
        # A monitoring group takes only tasks of its parent.
        self.write('g2/tasks', str(proc.pid))
        self.assertEqual('', self.read('g1', 'mon_groups', 'm1', 'tasks'))
        self.assertEqual(
            "Can't move task to different control group\n"
            "Error while processing task %d\n" % proc.pid,
            self.assertErrno(errno.EINVAL, self.write,
                             'g1/mon_groups/m1/tasks', str(proc.pid)))
        # A thread of another process, by its thread id (in a child: an
        # eventlet-patched test process would give a green thread's id).
        child = subprocess.Popen(
            [sys.executable, '-c', 'import threading, time\n'
             'def run():\n'
             '    print(threading.get_native_id(), flush=True)\n'
             '    time.sleep(30)\n'
             'threading.Thread(target=run, daemon=True).start()\n'
             'time.sleep(30)\n'], stdout=subprocess.PIPE)
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        tid = int(child.stdout.readline())
        self.assertNotEqual(child.pid, tid)
        self.write('g1/tasks', str(tid))
        self.assertEqual('%d\n' % tid, self.read('g1', 'tasks'))
        self.assertIn(child.pid, self.task_ids('tasks'))
        # Exited tasks vanish; writing them gives ESRCH.
        proc.kill()
        proc.wait()
        self.assertEqual('', self.read('g2', 'tasks'))
        self.assertEqual(
            'No task %d\nError while processing task %d\n' % (proc.pid,
                                                              proc.pid),
            self.assertErrno(errno.ESRCH, self.write, 'g2/tasks',
                             str(proc.pid)))
        # rmdir gives the tasks back to the root.
        os.rmdir(self.path('g1'))
        self.assertIn('%d\n' % tid, self.read('tasks'))

    def test_cpus(self):
        os.mkdir(self.path('g1'))
        self.assertEqual('0\n', self.read('g1', 'cpus'))
        self.write('g1/cpus_list', '0\n')
        self.assertEqual('0\n', self.read('g1', 'cpus_list'))
        self.assertNotIn(0, kparse.parse_cpulist(self.read('cpus_list'), 64))
        self.assertEqual("Can't drop CPUs from default group\n",
                         self.assertErrno(errno.EINVAL, self.write,
                                          'cpus_list', '\n'))
        self.assertEqual('Bad CPU list/mask\n', self.assertErrno(
            errno.EINVAL, self.write, 'g1/cpus', 'xyz'))


class CountersTest(base.EmulatorTestCase):

    def test_counters_grow_from_cpu_time(self):
        cpus, _ = launcher.host_cpus()
        cpu = cpus[-1]
        dom = profiles.REFERENCE.cpu_domains(cpus)[cpu]
        os.mkdir(self.path('g1'))
        proc = self.spawn('import time\nt = time.time()\n'
                          'while time.time() - t < 20: pass', cpu=cpu)
        self.write('g1/tasks', str(proc.pid))
        data = 'g1/mon_data/mon_L3_%02d/' % dom
        values = []
        for _ in range(3):
            time.sleep(0.4)
            values.append(int(self.read(data + 'mbm_total_bytes')))
        self.assertGreater(values[0], 0)
        self.assertLess(values[0], values[1])
        self.assertLess(values[1], values[2])
        self.assertGreater(int(self.read(data + 'llc_occupancy')), 0)
        self.assertGreater(int(self.read(data + 'mbm_local_bytes')), 0)
        truth = self.client.truth()['g1']['shown'][dom]['mbm_total_bytes']
        self.assertGreaterEqual(truth, values[2])

    def test_injection(self):
        os.makedirs(self.path('g1', 'mon_groups', 'm1'))
        self.client.set_counter('g1', 5000, domain=0,
                                event='mbm_total_bytes')
        self.client.set_counter('g1/mon_groups/m1', 37, domain=0,
                                event='mbm_total_bytes')
        self.assertEqual('5037\n', self.read(
            'g1/mon_data/mon_L3_00/mbm_total_bytes'))
        self.client.set_sentinel('g1/mon_groups/m1', 'Unavailable',
                                 domain=0)
        self.assertEqual('Unavailable\n', self.read(
            'g1/mon_groups/m1/mon_data/mon_L3_00/mbm_total_bytes'))
        self.assertEqual('5000\n', self.read(
            'g1/mon_data/mon_L3_00/mbm_total_bytes'))
        self.client.set_rate('g1', 1e6, domain=0, event='mbm_local_bytes')
        first = int(self.read('g1/mon_data/mon_L3_00/mbm_local_bytes'))
        time.sleep(0.3)
        second = int(self.read('g1/mon_data/mon_L3_00/mbm_local_bytes'))
        self.assertGreaterEqual(second - first, 250000)
        self.client.reset('g1')
        self.assertEqual('0\n', self.read(
            'g1/mon_data/mon_L3_00/mbm_total_bytes'))
        ops = [e['op'] for e in self.client.log()]
        self.assertEqual(['mkdir', 'mkdir', 'set_counter', 'set_counter',
                          'set_sentinel', 'set_rate', 'reset'], ops)

    def test_remount_destroys_groups(self):
        os.makedirs(self.path('g1', 'mon_groups', 'm1'))
        proc = self.spawn('import time\ntime.sleep(30)')
        self.write('g1/tasks', str(proc.pid))
        self.write('schemata', 'L3:0=f\n')
        self.client.remount('cdp')
        self.assertNotIn('g1', os.listdir(self.root))
        self.assertIn(proc.pid, self.task_ids('tasks'))
        self.assertEqual('    MB:0=100;1=100\nL3DATA:0=7ff;1=7ff\n'
                         'L3CODE:0=7ff;1=7ff\n', self.read('schemata'))
        self.assertEqual(['L3CODE', 'L3DATA', 'L3_MON', 'MB',
                          'last_cmd_status'],
                         sorted(os.listdir(self.path('info'))))


class AmdProfileTest(base.EmulatorTestCase):

    profile = 'amd'

    def test_amd(self):
        self.assertEqual('SMBA:0=2048;1=2048\n  MB:0=2048;1=2048\n'
                         '  L3:0=ffff;1=ffff\n', self.read('schemata'))
        os.mkdir(self.path('g1'))
        self.write('g1/schemata', 'L3:0=f0f\n')
        self.assertEqual('0=SSSSSSSSSSSSSSSS;1=SSSSSSSSSSSSSSSS\n',
                         self.read('info', 'L3', 'bit_usage'))


class CliTest(base.EmulatorTestCase):

    profile = 'l3-cat'

    def test_background_mount_and_umount(self):
        work = tempfile.mkdtemp(prefix='rdt-emu-cli-')
        self.addCleanup(shutil.rmtree, work, True)
        mnt = os.path.join(work, 'resctrl')
        os.mkdir(mnt)
        sock = os.path.join(work, 'control')
        cli = [sys.executable, '-m', 'rdt_virt.cmd.emulator']
        self.addCleanup(launcher.unmount, mnt, True)
        release = os.path.join(work, 'osrelease')
        out = subprocess.run(cli + ['mount', '--profile', 'monitoring',
                                    '--control', sock, '--log-file',
                                    os.path.join(work, 'emulator.log'),
                                    '--kernel', '6.8', '--osrelease',
                                    release, mnt],
                             capture_output=True, text=True, check=True)
        pid = int(out.stdout)
        self.assertTrue(launcher.is_mounted(mnt))
        with open(release) as f:
            self.assertEqual('6.8.0-rdt-virt-emulated\n', f.read())
        self.assertEqual('', open(os.path.join(mnt, 'schemata')).read())
        out = subprocess.run(cli + ['ctl', '--control', sock, 'ping'],
                             capture_output=True, text=True, check=True)
        self.assertIn('"profile": "monitoring"', out.stdout)
        subprocess.run(cli + ['umount', mnt], check=True)
        self.assertFalse(launcher.is_mounted(mnt))
        # Generous: the emulator finishes its last counter update first,
        # which a busy host slows down.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            self.fail('the emulator did not exit after umount')
        out = subprocess.run(cli + ['mount', self.root],
                             capture_output=True, text=True)
        self.assertEqual(1, out.returncode)
        self.assertIn('already mounted', out.stderr)
