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

"""Emulated MBA effect: the throttle mapping and the cgroup placement."""

import os

import fixtures

from rdt_virt.emulator import enforce
from rdt_virt.emulator import profiles
from rdt_virt.emulator import schemata
from tests import base
from tests.unit.emulator import fakes

GIB = 1024 ** 3
VCPU = '/machine/qemu-1-protected.libvirt-qemu/vcpu0'


class MappingTest(base.TestCase):

    def share(self, profile, values, nthreads=1):
        return enforce.thread_cpu_share(profiles.get_profile(profile),
                                        values, nthreads)

    def test_percent_is_a_per_thread_share_of_one_cpu(self):
        self.assertEqual(0.1, self.share('reference', {0: 10, 1: 10}))
        self.assertEqual(0.5, self.share('reference', {0: 50, 1: 50}, 7))
        # A thread moves between domains: the lowest value holds.
        self.assertEqual(0.2, self.share('reference', {0: 50, 1: 20}))
        self.assertIsNone(self.share('reference', {0: 100, 1: 100}))

    def test_amd_units_of_2048(self):
        self.assertEqual(0.5, self.share('amd', {0: 1024, 1: 2048}))
        self.assertEqual(1 / 2048.0, self.share('amd', {0: 1, 1: 1}))
        self.assertIsNone(self.share('amd', {0: 2048, 1: 2048}))

    def test_mbps_is_a_group_aggregate(self):
        # 2 GiB/s unthrottled per CPU: 512 MBps on each of two domains is
        # half a CPU for the whole group.
        self.assertEqual(0.5, self.share('mba-mbps', {0: 512, 1: 512}))
        self.assertEqual(0.125, self.share('mba-mbps', {0: 512, 1: 512}, 4))
        self.assertIsNone(self.share(
            'mba-mbps', {0: schemata.MBPS_MAX, 1: schemata.MBPS_MAX}))

    def test_no_mba(self):
        self.assertIsNone(self.share('l3-cat', {}))
        self.assertIsNone(self.share('reference', {}))

    def test_cgroup_values(self):
        self.assertEqual(10000, enforce.cfs_quota_us(0.1))
        self.assertEqual(100000 // 3, enforce.cfs_quota_us(1 / 3.0))
        # The kernel's minimum quota is 1 ms.
        self.assertEqual(1000, enforce.cfs_quota_us(1 / 2048.0))
        self.assertEqual(102, enforce.v1_shares(0.1))
        self.assertEqual(2, enforce.v1_shares(0.0001))
        self.assertEqual(10, enforce.v2_weight(0.1))
        self.assertEqual(1, enforce.v2_weight(0.001))

    def test_desired_shares_counts_threads_per_group(self):
        profile = profiles.get_profile('mba-mbps')
        g1, g2 = object(), object()
        config = {g1: {0: 512, 1: 512}, g2: {0: schemata.MBPS_MAX}}
        self.assertEqual(
            {1: 0.25, 2: 0.25},
            enforce.desired_shares(profile, {1: g1, 2: g1, 3: g2},
                                   config.get))

    def test_libvirt_partition(self):
        self.assertEqual('/machine', enforce.libvirt_partition(VCPU))
        self.assertEqual('/machine.slice', enforce.libvirt_partition(
            '/machine.slice/machine-qemu\\x2d1\\x2dvm.scope/libvirt/vcpu0'))
        self.assertEqual('/', enforce.libvirt_partition(
            '/qemu-2-vm.libvirt-qemu/emulator'))
        self.assertIsNone(enforce.libvirt_partition('/user.slice'))

    def test_libvirt_domain(self):
        self.assertEqual('/machine/qemu-1-protected.libvirt-qemu',
                         enforce.libvirt_domain(VCPU))
        self.assertEqual(
            '/machine.slice/machine-qemu\\x2d1\\x2dvm.scope',
            enforce.libvirt_domain('/machine.slice/machine-qemu\\x2d1'
                                   '\\x2dvm.scope/libvirt/emulator'))
        self.assertIsNone(enforce.libvirt_domain('/user.slice/x'))


class FakeCgroups(object):
    """A cgroup tree and /proc in plain directories.

    Writing a thread id into a ``tasks`` (v1) or ``cgroup.threads`` (v2)
    file moves the thread, as the kernel would: its ``/proc/<tid>/cgroup``
    changes.
    """

    def __init__(self, root, version):
        self.root = root
        self.version = version
        self.proc = os.path.join(root, 'proc')
        self.cgroup = os.path.join(root, 'cgroup')
        self.mount = os.path.join(self.cgroup, 'cpu' if version == 1 else '')
        os.makedirs(self.mount, exist_ok=True)
        if version == 1:
            self._put(os.path.join(self.mount, 'cpu.cfs_quota_us'), '-1\n')
        else:
            self._put(os.path.join(self.mount, 'cgroup.controllers'),
                      'cpuset cpu io memory\n')

    @staticmethod
    def _put(path, text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)

    def place(self, tid, path):
        os.makedirs(os.path.join(self.mount, path.lstrip('/')),
                    exist_ok=True)
        if self.version == 1:
            text = '2:cpuacct:/\n1:cpu:%s\n0::/\n' % path
        else:
            text = '0::%s\n' % path
        self._put(os.path.join(self.proc, str(tid), 'cgroup'), text)

    def where(self, tid):
        with open(os.path.join(self.proc, str(tid), 'cgroup')) as f:
            for line in f.read().splitlines():
                idx, ctrl, path = line.split(':', 2)
                if (self.version == 1 and ctrl == 'cpu') or (
                        self.version == 2 and idx == '0'):
                    return path

    def read(self, path):
        with open(os.path.join(self.mount, path.lstrip('/'))) as f:
            return f.read()

    def exists(self, path):
        return os.path.exists(os.path.join(self.mount, path.lstrip('/')))

    def backend(self):
        fake = self
        cls = enforce.CgroupV1 if self.version == 1 else enforce.CgroupV2

        class Backend(cls):
            busy = set()
            gone = set()

            def attach(self, cgroup_dir, tid):
                if tid in self.gone:
                    raise enforce.CgroupError('writing %d: No such process'
                                              % tid)
                super().attach(cgroup_dir, tid)
                fake.place(tid, '/' + os.path.relpath(cgroup_dir, fake.mount))

            def remove(self, cgroup_dir):
                if cgroup_dir in self.busy:
                    raise enforce.CgroupError('rmdir %s: busy' % cgroup_dir)
                # A real cgroupfs has only the kernel's files in a
                # cgroup, which rmdir takes along.
                for name in os.listdir(cgroup_dir):
                    if os.path.isfile(os.path.join(cgroup_dir, name)):
                        os.unlink(os.path.join(cgroup_dir, name))
                super().remove(cgroup_dir)

        return Backend(self.mount, self.proc)


class EnforcerTestCase(fakes.ModelTestCase):

    version = 1

    def setUp(self):
        super().setUp()
        self.fs = FakeCgroups(self.useFixture(
            fixtures.TempDir()).path, self.version)
        self.fs.place(100, VCPU)
        self.fs.place(101, '/user')
        self.log = self.useFixture(fixtures.FakeLogger(
            name='rdt_virt.emulator.enforce', level=30))
        self.enforcer = enforce.Enforcer(self.model, self.fs.backend())
        self.tree.mkdir('/g1')

    def ours(self, tid, parent):
        return '%s/%s%d' % (parent.rstrip('/'), enforce.PREFIX, tid)


class EnforcerV1Test(EnforcerTestCase):

    def test_limits_follow_the_schemata(self):
        self.write('/g1/tasks', '100')
        self.write('/g1/tasks', '101')
        self.enforcer.apply()
        # Unthrottled group: nothing happens.
        self.assertEqual(VCPU, self.fs.where(100))
        self.assertEqual({}, self.enforcer.placements)

        self.write('/g1/schemata', 'MB:0=10;1=10\n')
        self.enforcer.apply()
        # A libvirt vCPU goes beside the domains; another thread nests.
        mine = self.ours(100, '/machine')
        self.assertEqual(mine, self.fs.where(100))
        self.assertEqual('10000', self.fs.read(mine + '/cpu.cfs_quota_us'))
        self.assertEqual('100000', self.fs.read(mine + '/cpu.cfs_period_us'))
        self.assertEqual('102', self.fs.read(mine + '/cpu.shares'))
        self.assertEqual(self.ours(101, '/user'), self.fs.where(101))

        self.write('/g1/schemata', 'MB:0=50;1=60\n')
        self.enforcer.apply()
        self.assertEqual('50000', self.fs.read(mine + '/cpu.cfs_quota_us'))
        self.assertEqual('512', self.fs.read(mine + '/cpu.shares'))
        self.assertEqual(mine, self.fs.where(100))

        # Back to the default group: back home, our cgroup gone.
        self.write('/tasks', '100')
        self.enforcer.apply()
        self.assertEqual(VCPU, self.fs.where(100))
        self.assertFalse(self.fs.exists(mine))
        self.assertEqual([101], list(self.enforcer.placements))

        # The last thread exits: its cgroup goes.
        self.threads.exit(101)
        self.model.refresh()
        self.enforcer.apply()
        self.assertFalse(self.fs.exists(self.ours(101, '/user')))
        self.assertEqual({}, self.enforcer.placements)

    def test_group_removed_and_release_all(self):
        self.write('/g1/schemata', 'MB:0=20;1=20\n')
        self.write('/g1/tasks', '100')
        self.enforcer.apply()
        status = self.enforcer.describe()
        self.assertEqual({'share': 0.2, 'quota_us': 20000,
                          'cgroup': os.path.join(
                              self.fs.mount, 'machine',
                              enforce.PREFIX + '100'),
                          'home': VCPU}, status['threads']['100'])
        self.enforcer.release_all()
        self.assertEqual(VCPU, self.fs.where(100))
        self.tree.rmdir('/g1')
        self.enforcer.apply()
        self.assertEqual(VCPU, self.fs.where(100))

    def test_busy_cgroups_are_removed_later(self):
        self.write('/g1/schemata', 'MB:0=10;1=10\n')
        self.write('/g1/tasks', '100')
        self.enforcer.apply()
        mine = self.ours(100, '/machine')
        # The thread exits, but a moment passes before the kernel lets
        # its cgroup go.
        self.enforcer.backend.busy.add(self.fs.mount + mine)
        self.threads.exit(100)
        self.model.refresh()
        self.enforcer.apply()
        self.assertTrue(self.fs.exists(mine))
        self.enforcer.backend.busy.clear()
        self.enforcer.apply()
        self.assertFalse(self.fs.exists(mine))
        # At shutdown too.
        self.write('/g1/tasks', '101')
        self.enforcer.apply()
        other = self.ours(101, '/user')
        self.enforcer.backend.busy.add(self.fs.mount + other)
        self.enforcer.release_all(timeout=0.2)
        self.assertTrue(self.fs.exists(other))
        self.assertIn('could not remove cgroup', self.log.output)
        self.enforcer.backend.busy.clear()
        self.enforcer.release_all()
        self.assertFalse(self.fs.exists(other))

    def test_a_thread_that_exits_while_placed_leaves_no_cgroup(self):
        self.write('/g1/schemata', 'MB:0=10;1=10\n')
        self.write('/g1/tasks', '100')
        self.enforcer.backend.gone.add(100)
        self.enforcer.apply()
        self.assertFalse(self.fs.exists(self.ours(100, '/machine')))
        self.assertEqual({}, self.enforcer.placements)

    def test_a_thread_moved_away_is_placed_again(self):
        self.write('/g1/schemata', 'MB:0=10;1=10\n')
        self.write('/g1/tasks', '100')
        self.enforcer.apply()
        # Someone (libvirt) puts it back where it was.
        self.fs.place(100, VCPU)
        self.enforcer.apply()
        self.assertEqual(self.ours(100, '/machine'), self.fs.where(100))
        self.assertEqual(VCPU, self.enforcer.placements[100].home)

    def test_failures_are_logged_once(self):
        self.write('/g1/schemata', 'MB:0=10;1=10\n')
        self.write('/g1/tasks', '101')
        # A file where the cgroup must go: creating it fails.
        FakeCgroups._put(os.path.join(self.fs.mount, 'user',
                                      enforce.PREFIX + '101'), '')
        self.enforcer.apply()
        self.enforcer.apply()
        self.assertEqual({}, self.enforcer.placements)
        self.assertEqual('/user', self.fs.where(101))
        lines = self.log.output.splitlines()
        self.assertEqual(1, len(lines), lines)
        self.assertIn('cannot slow down thread 101', lines[0])


class EnforcerV2Test(EnforcerTestCase):

    version = 2

    def test_limits_follow_the_schemata(self):
        self.write('/g1/schemata', 'MB:0=10;1=10\n')
        self.write('/g1/tasks', '100')
        self.enforcer.apply()
        # v2: inside the thread's own cgroup, threaded.
        mine = self.ours(100, VCPU)
        self.assertEqual(mine, self.fs.where(100))
        self.assertEqual('10000 100000', self.fs.read(mine + '/cpu.max'))
        self.assertEqual('10', self.fs.read(mine + '/cpu.weight'))
        self.assertEqual('threaded', self.fs.read(mine + '/cgroup.type'))
        self.assertEqual('+cpu', self.fs.read(
            VCPU + '/cgroup.subtree_control'))
        self.write('/tasks', '100')
        self.enforcer.apply()
        self.assertEqual(VCPU, self.fs.where(100))
        self.assertFalse(self.fs.exists(mine))


class ProbeTest(base.TestCase):

    def test_v1_v2_and_neither(self):
        tmp = self.useFixture(fixtures.TempDir()).path
        backend, reason = enforce.probe(tmp, '/proc')
        self.assertIsNone(backend)
        self.assertIn('no cgroup CPU controller under %s' % tmp, reason)

        v2 = FakeCgroups(os.path.join(tmp, 'v2'), 2)
        backend, reason = enforce.probe(v2.cgroup)
        self.assertIsInstance(backend, enforce.CgroupV2)

        v1 = FakeCgroups(os.path.join(tmp, 'v1'), 1)
        # Hybrid: a unified mount without the cpu controller.
        FakeCgroups._put(os.path.join(v1.cgroup, 'unified',
                                      'cgroup.controllers'), 'hugetlb\n')
        backend, reason = enforce.probe(v1.cgroup)
        self.assertIsInstance(backend, enforce.CgroupV1)
        self.assertEqual(v1.mount, backend.mount)


class CountersTest(fakes.ModelTestCase):

    def test_counters_follow_cpu_time_alone_with_an_effect(self):
        self.tree.mkdir('/g1')
        self.write('/g1/schemata', 'MB:0=10;1=10\n')
        self.write('/g1/tasks', '100')
        self.model.mba_effect = True
        self.threads.run(100, 0.1, cpu=0)
        self.clock.advance(1.0)
        text = self.read('/g1/mon_data/mon_L3_00/mbm_total_bytes')
        # 0.1 CPU-second at 2 GiB per CPU-second, rounded to the unit:
        # the throttle shows through the CPU time, not a second time.
        expected = int(0.2 * GIB) // 65536 * 65536
        self.assertEqual(expected, int(text))
