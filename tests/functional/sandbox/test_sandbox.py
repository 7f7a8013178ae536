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

"""The sandbox itself: isolation, libvirt's view, guests, cleanup."""

import os
import signal
import time

from lxml import etree

from rdt_virt.sandbox import guest
from rdt_virt.sandbox import layout
from tests.functional import emulated


def _stat(tid):
    with open('/proc/%d/stat' % tid) as f:
        return f.read().rsplit(')', 1)[1].split()


def _cpu_ticks(tid):
    fields = _stat(tid)
    return int(fields[11]) + int(fields[12])


def _runnable(tid):
    return _stat(tid)[0] == 'R'


def _qemu_pids(sb):
    pids = []
    for pid in sb.pids():
        try:
            with open('/proc/%d/comm' % pid) as f:
                if f.read().startswith('qemu'):
                    pids.append(pid)
        except OSError:
            pass
    return pids


class TestSandbox(emulated.SandboxTestCase):

    def test_libvirt_sees_the_profile(self):
        caps = etree.fromstring(self.conn.getCapabilities())
        banks = caps.findall('host/cache/bank')
        self.assertEqual(['0', '1'], [b.get('id') for b in banks])
        for bank in banks:
            self.assertEqual(('3', 'both', '36608', 'KiB'), (
                bank.get('level'), bank.get('type'), bank.get('size'),
                bank.get('unit')))
            control = bank.find('control')
            # 11 ways of 36608 KiB; 16 L3 CLOSIDs.
            self.assertEqual(('3328', '16'), (control.get('granularity'),
                                              control.get('maxAllocs')))
        self.assertEqual(['0', '1'], [n.get('id') for n in caps.findall(
            'host/memory_bandwidth/node')])
        node = caps.find('host/memory_bandwidth/node/control')
        self.assertEqual(('10', '10', '8'), (
            node.get('granularity'), node.get('min'), node.get('maxAllocs')))
        self.assertEqual(
            ['llc_occupancy'],
            [f.get('name') for f in caps.findall(
                'host/cache/monitor/feature')])

    def test_host_is_untouched(self):
        # libvirt's resctrl and private state exist only in the sandbox's
        # namespace; outside, the emulator is visible in the sandbox
        # directory only.
        self.assertFalse(os.path.exists('/sys/fs/resctrl/info'))
        self.assertTrue(os.path.isdir(
            os.path.join(self.sb.sandbox.resctrl_root, 'info')))
        inside = '/proc/%d/root/sys/fs/resctrl' % self.sb.sandbox.pid
        self.assertEqual(os.stat(self.sb.sandbox.resctrl_root).st_dev,
                         os.stat(inside).st_dev)
        with open('/etc/libvirt/qemu.conf') as f:
            self.assertNotIn('rdt-virt-sandbox', f.read())
        private = self.sb.sandbox.paths.private('/etc/libvirt')
        with open(os.path.join(private, 'qemu.conf')) as f:
            self.assertIn('user = "root"', f.read())
        self.assertNotEqual(layout.mntns(), layout.mntns(self.sb.sandbox.pid))
        # The release it emulates, for [rdt] kernel_release_file.
        with open(self.sb.sandbox.kernel_release_file) as f:
            self.assertRegex(f.read(),
                             r'^[0-9]+\.[0-9]+\.0-rdt-virt-emulated\n$')

    def test_burning_guest_uses_cpu_and_idle_guest_does_not(self):
        burn = self.sb.boot('burn', program='burn')
        idle = self.sb.boot('idle', program='idle')
        (burn_tid,) = guest.vcpu_thread_ids(burn)
        (idle_tid,) = guest.vcpu_thread_ids(idle)
        # SeaBIOS spends about 1.5 s of CPU before it boots the program.
        deadline = time.monotonic() + 30
        while not (guest.program_started(idle) and
                   guest.program_started(burn)):
            self.assertLess(time.monotonic(), deadline,
                            'the guests never reached their programs')
            time.sleep(0.2)
        # Other tests may burn the same 2 cores, so CPU time alone says
        # little: a burning vCPU is always runnable, a halted one sleeps.
        before = _cpu_ticks(burn_tid), _cpu_ticks(idle_tid)
        samples = []
        for _ in range(30):
            samples.append((_runnable(burn_tid), _runnable(idle_tid)))
            time.sleep(0.05)
        after = _cpu_ticks(burn_tid), _cpu_ticks(idle_tid)
        self.assertGreaterEqual(sum(b for b, _ in samples), 27, samples)
        self.assertLessEqual(sum(i for _, i in samples), 3, samples)
        self.assertGreater(after[0] - before[0], 0)
        self.assertLess(after[1] - before[1], os.sysconf('SC_CLK_TCK') // 5)

    def test_stop_destroys_guests_and_every_process(self):
        self.sb.boot('g1')
        sb = self.sb.sandbox
        self.assertEqual(1, len(_qemu_pids(sb)))
        # The holder, virtlogd, libvirtd and QEMU at least; the emulator
        # serves from outside the namespace.
        pids = sb.pids()
        self.assertGreaterEqual(len(pids), 4)
        emulator_pid = int(open(sb.paths.emulator_pid).read())
        sb.stop()
        self.assertEqual([], [p for p in pids + [emulator_pid]
                              if layout.alive(p)])
        self.assertFalse(sb.running())
        self.assertFalse(os.path.ismount(sb.resctrl_root))

    def test_start_cleans_up_a_crashed_run(self):
        self.sb.boot('g1')
        sb = self.sb.sandbox
        os.kill(sb.pid, signal.SIGKILL)
        time.sleep(0.2)
        # libvirtd, virtlogd, QEMU and the emulator outlive the holder.
        self.assertFalse(sb.running())
        left = sb.pids()
        self.assertEqual(1, len(_qemu_pids(sb)))
        self.assertGreaterEqual(len(left), 3)
        sb.start()
        self.assertEqual([], [p for p in left if layout.alive(p)])
        self.assertTrue(sb.running())
        self.assertEqual([], _qemu_pids(sb))
