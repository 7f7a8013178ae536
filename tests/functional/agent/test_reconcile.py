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

"""The agent converges an emulated host and repairs its drift."""

import os
import time

import fixtures
import testscenarios

from rdt_virt.agent import domains
from rdt_virt.agent import model
from rdt_virt.agent import reconcile
from rdt_virt.emulator import kernels
from rdt_virt.privsep import resctrl as priv
from tests.functional.agent import base
from tests.functional import matrix

P = base.PREFIX
MB10, MB20, MB30 = P + 'mb10', P + 'mb20', P + 'mb30'


class TestConverge(testscenarios.WithScenarios, base.AgentTestCase):
    """On every kernel of the matrix (shared groups: Intel, AET, MPAM)."""

    scenarios = matrix.scenarios(hosts=['intel', 'aet', 'mpam'])

    def setUp(self):
        super().setUp()
        # What the privileged side learnt of another kernel does not hold.
        self.useFixture(fixtures.MockPatchObject(
            priv, '_MULTI_TID', {'supported': None}))

    def boot_three(self):
        self.a = self.boot(base.shared(10))
        self.b = self.boot(base.shared(10))
        self.c = self.boot(base.shared(30))
        self.d = self.boot()                       # no policy, monitored
        self.e = self.boot(monitor=False)          # no policy at all

    def assertConverged(self):
        self.assertPlaced(self.a, MB10)
        self.assertPlaced(self.b, MB10)
        self.assertPlaced(self.c, MB30)
        self.assertPlaced(self.d, None)
        self.assertPlaced(self.e, None, mon=None)

    def test_cold_start_then_converged_ticks_write_nothing(self):
        self.flags(default_group_l3_ways=4, group='rdt')
        self.agent = self.new_agent()
        self.boot_three()
        stats = self.agent.tick()
        self.assertGreater(stats.writes, 0)
        self.assertEqual([MB10, MB30], self.groups())
        self.assertEqual({'MB': {0: 10, 1: 10}, 'L3': {0: 0xf, 1: 0xf}},
                         self.schemata(MB10))
        self.assertEqual({0: 0xf, 1: 0xf}, self.schemata()['L3'])
        self.assertConverged()
        seq = self.mark()
        for _ in range(3):
            self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations(seq))

    def test_agent_restart_writes_nothing(self):
        self.boot_three()
        self.agent.tick()
        seq = self.mark()
        self.agent = self.new_agent()
        self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations(seq))
        self.assertConverged()

    def test_drift_group_deleted(self):
        self.boot_three()
        self.agent.tick()
        os.rmdir(self.path(MB10))
        self.assertPlaced(self.a, None, mon=None)
        self.agent.tick()
        self.assertConverged()

    def test_drift_thread_moved(self):
        self.boot_three()
        self.agent.tick()
        tid = sorted(self.host.vcpu_tids(self.a))[0]
        self.write('tasks', str(tid))
        self.write(MB30 + '/tasks', str(sorted(self.host.vcpu_tids(
            self.c))[0]))
        self.agent.tick()
        self.assertConverged()

    def test_drift_monitoring_group_deleted(self):
        self.boot_three()
        self.agent.tick()
        os.rmdir(self.path(MB10, 'mon_groups', P + 'm-' + self.a))
        self.agent.tick()
        self.assertConverged()

    def test_drift_schemata_changed(self):
        self.boot_three()
        self.agent.tick()
        self.write(MB10 + '/schemata', 'MB:0=100\n')
        self.agent.tick()
        self.assertEqual({0: 10, 1: 10}, self.schemata(MB10)['MB'])

    def test_remount_restores_everything(self):
        self.flags(default_group_l3_ways=3, group='rdt')
        self.agent = self.new_agent()
        self.boot_three()
        self.agent.tick()
        self.client.remount()
        self.assertEqual([], self.groups())
        self.agent.tick()
        self.assertEqual({0: 0x7, 1: 0x7}, self.schemata()['L3'])
        self.assertConverged()
        seq = self.mark()
        self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations(seq))

    def test_hotplugged_vcpu(self):
        a = self.boot(base.shared(20))
        self.agent.tick()
        tid = self.host.hotplug(a)
        self.assertEqual((None, None), self.location(tid))
        self.agent.tick()
        self.assertEqual((MB20, P + 'm-' + a), self.location(tid))

    def test_extra_threads(self):
        self.flags(place_extra_threads=True, group='rdt_agent')
        self.agent = self.new_agent()
        a = self.boot(base.shared(20), others=2)
        self.agent.tick()
        self.assertPlaced(a, MB20, extras=True)

    def test_policy_gone_and_instances_gone(self):
        self.boot_three()
        self.agent.tick()
        for uuid in (self.a, self.b, self.c, self.d, self.e):
            self.destroy(uuid)
        self.agent.tick()
        self.assertEqual([], self.groups())
        self.assertEqual([], self.mon_groups())

    def test_percentage_changed_keeps_counters(self):
        a = self.boot(base.shared(10))
        self.agent.tick()
        mon = P + 'm-' + a
        self.client.set_counter('%s/mon_groups/%s' % (MB10, mon), 10 ** 9)
        inst = self.source.domains[a]
        self.source.domains[a] = model.Instance(
            a, inst.name, inst.domain_id, bandwidth=base.shared(20),
            monitor=True)
        self.agent.tick()
        self.assertPlaced(a, MB20)
        self.assertEqual([MB20], self.groups())
        if self.profile == 'mpam':
            # No MBM in this kernel's MPAM driver, and no rename to
            # another CLOSID: the group was re-created.
            self.assertFalse(self.agent.executor.can_rename)
            return
        text = self.read(MB20, 'mon_groups', mon, 'mon_data', 'mon_L3_00',
                         'mbm_total_bytes').strip()
        if kernels.get_kernel(self.kernel).has('mon_rename'):
            # Renamed, not re-created: the counters came along.
            self.assertGreaterEqual(int(text), 10 ** 9)
        elif text != 'Unavailable':
            # Re-created (no rename before 6.5): they start again, and a
            # new group whose threads have not run reads Unavailable.
            self.assertLess(int(text), 10 ** 9)

    def test_changed_event_takes_threads_out_of_the_old_group(self):
        # The fast path reads only the groups of the new policy; it must
        # also read the one the instance was in, or it plans as if the
        # threads were in the default group and the kernel refuses.
        a = self.boot(base.shared(10))
        self.boot(base.shared(10))
        self.agent.tick()
        inst = self.source.domains[a]
        self.source.domains[a] = model.Instance(
            a, inst.name, inst.domain_id, monitor=True)
        seq = self.mark()
        self.agent.handle(domains.Event(domains.CHANGED, a,
                                        time.monotonic()))
        self.assertPlaced(a, None)
        refused = [e for e in self.mutations(seq) if e['result'] != 'ok']
        if not kernels.get_kernel(self.kernel).has('mon_rename'):
            # Before 6.5 the agent's one rename attempt is refused (EPERM)
            # and it re-creates the monitoring group instead.
            self.assertEqual([('rename', 'EPERM')],
                             [(e['op'], e['result']) for e in refused])
            refused = []
        elif self.profile == 'mpam':
            # MPAM: a monitoring group cannot change CLOSID (its RMID is
            # a PMG of the old one); refused once, then re-created.
            self.assertEqual([('rename', 'ENOTSUP')],
                             [(e['op'], e['result']) for e in refused])
            refused = []
        self.assertEqual([], refused)

    def test_unreadable_tasks_skip_the_tick_without_a_traceback(self):
        a = self.boot(base.shared(10))
        self.agent.tick()
        self.client.fail('read', '/%s/tasks' % MB10, 'EIO', count=2)
        stats = self.agent.tick()
        self.assertEqual('resctrl unreadable', stats.skipped)
        self.agent.handle(domains.Event(domains.STARTED, a,
                                        time.monotonic()))
        self.assertNotIn('Traceback', self.logger.output)
        self.assertIn('Cannot read resctrl', self.logger.output)
        self.assertEqual(0, self.agent.tick().writes)
        self.assertPlaced(a, MB10)

    def test_per_instance_group_monitored_by_its_own_rmid(self):
        a = self.boot(base.own(20, 'percent'))
        self.agent.tick()
        group = P + 'i-' + a
        self.assertPlaced(a, group, mon=None)
        self.assertEqual([], self.mon_groups(group))
        self.assertEqual((group, None), self.agent.placements[a].counters)


class TestLibvirtGroups(base.AgentTestCase):
    """Groups libvirt made, as libvirt would have made them."""

    def make_libvirt_group(self, name, l3, mb, tids):
        os.mkdir(self.path(name))
        self.write(name + '/schemata', 'L3:0=%x;1=%x\nMB:0=%d;1=%d\n' % (
            l3, l3, mb, mb))
        for tid in tids:
            self.write(name + '/tasks', str(tid))

    def test_restored_after_remount(self):
        self.flags(default_group_l3_ways=8, group='rdt')
        self.agent = self.new_agent()
        self.write('schemata', 'L3:0=ff;1=ff\n')
        alloc = model.Allocation(
            'qemu-1-instance-00000001-vcpus_0-1', frozenset((0, 1)),
            (model.CacheRequest(3, 'both', 0, 3328 * 1024),
             model.CacheRequest(3, 'both', 1, 3328 * 1024)),
            {0: 50, 1: 50}, True)
        a = self.boot(allocs=[alloc])
        self.make_libvirt_group(alloc.group, 0x100, 50,
                                self.host.vcpu_tids(a))
        seq = self.mark()
        self.assertEqual(0, self.agent.tick().writes)
        self.assertEqual([], self.mutations(seq))
        self.client.remount()
        self.agent.tick()
        self.assertPlaced(a, alloc.group, mon=None)
        sch = self.read(alloc.group, 'schemata').replace(' ', '')
        self.assertIn('MB:0=50;1=50', sch)
        self.assertIn('L3:0=100;1=100', sch)
        self.assertEqual((alloc.group, None), self.agent.placements[
            a].counters)

    def test_mbps_line_written_into_the_libvirt_group(self):
        # A cache allocation with an MB limit libvirt cannot express.
        alloc = model.Allocation(
            'qemu-1-instance-00000001-vcpus_0-1', frozenset((0, 1)),
            (model.CacheRequest(3, 'both', 0, 3328 * 1024),), {}, True)
        self.write('schemata', 'L3:0=ff;1=ff\n')
        a = self.boot(bw=base.own(40, 'percent'), allocs=[alloc])
        self.make_libvirt_group(alloc.group, 0x100, 100,
                                self.host.vcpu_tids(a))
        self.agent.tick()
        self.assertIn('MB:0=40;1=40',
                      self.read(alloc.group, 'schemata').replace(' ', ''))
        self.assertEqual([alloc.group], self.groups())

    def test_libvirt_groups_of_other_domains_untouched(self):
        self.make_libvirt_group('qemu-9-not-nova-vcpus_0', 0x7ff, 70, [])
        a = self.boot(base.shared(10))
        self.agent.tick()
        self.destroy(a)
        seq = self.mark()
        self.agent.tick()
        self.assertEqual(['qemu-9-not-nova-vcpus_0'], self.groups())
        self.assertNotIn('qemu-9', str(self.mutations(seq)))


class TestForeign(base.AgentTestCase):

    def tick(self):
        """A tick; returns the mutations it made."""
        seq = self.mark()
        self.agent.tick()
        return self.mutations(seq)

    def test_foreign_groups_untouched(self):
        os.mkdir(self.path('pqos-batch'))
        self.write('pqos-batch/schemata', 'MB:0=20;1=20\n')
        os.mkdir(self.path('mon_groups', 'collectd-0'))
        os.mkdir(self.path(P + 'mystery'))
        before = {name: self.read(name, 'schemata')
                  for name in ('pqos-batch', P + 'mystery')}
        uuids = [self.boot(base.shared(10)) for _ in range(2)]
        plain = self.boot()
        made = self.tick()
        # A thread of a policy-less instance that someone put elsewhere
        # stays there; one of a throttled instance is taken back.
        for tid in self.host.vcpu_tids(plain):
            self.write('pqos-batch/tasks', str(tid))
        self.write('pqos-batch/tasks', str(sorted(self.host.vcpu_tids(
            uuids[0]))[0]))
        made += self.tick()
        for uuid in uuids:
            self.destroy(uuid)
        made += self.tick()
        for entry in made:
            self.assertFalse(entry['path'].startswith(
                ('/pqos', '/mon_groups/collectd', '/' + P + 'mystery')),
                entry)
        self.assertEqual(sorted(['pqos-batch', P + 'mystery']),
                         self.groups())
        self.assertIn('collectd-0', self.mon_groups())
        for name, text in before.items():
            self.assertEqual(text, self.read(name, 'schemata'))
        self.assertPlaced(plain, 'pqos-batch', mon=None)
        self.assertEqual(reconcile.R_FOREIGN % 'pqos-batch',
                         self.agent.placements[plain].reason)


class TestRetries(base.AgentTestCase):

    def test_closid_exhaustion(self):
        # Reference profile: 8 MB CLOSIDs, the default group holds one.
        uuids = [self.boot(base.shared(10 * (i + 1))) for i in range(8)]
        self.agent.tick()
        self.assertEqual(7, len(self.groups()))
        late = [u for u in uuids if self.agent.placements[u].reason]
        self.assertEqual(1, len(late))
        late = late[0]
        self.assertEqual('no free CLOSID or RMID',
                         self.agent.placements[late].reason)
        self.assertIn('Cannot create', self.logger.output)
        self.assertPlaced(late, None, mon=None)
        for i, uuid in enumerate(uuids):
            if uuid != late:
                self.assertPlaced(uuid, P + 'mb%d' % (10 * (i + 1)))
        # One leaves: the next tick (retry interval 0) serves the late one.
        self.destroy(uuids[uuids.index(late) - 1])
        self.agent.tick()
        self.agent.tick()
        self.assertPlaced(late, P + 'mb%d' % (10 * (uuids.index(late) + 1)))

    def test_rmid_budget_rotates(self):
        self.flags(rmid_budget=2, rotation_interval=1.0, group='rdt_agent')
        self.agent = self.new_agent()
        uuids = [self.boot(base.shared(10)) for _ in range(5)]
        self.agent.tick()
        self.assertEqual(2, len(self.mon_groups(MB10)))
        doc = self.agent.sample()
        self.assertTrue(doc['host']['rotating'])
        self.assertEqual(0.4, doc['host']['mon_coverage'])
        first = set(self.mon_groups(MB10))
        seen = set(first)
        for _ in range(8):
            time.sleep(1.05)
            self.agent.tick()
            seen |= set(self.mon_groups(MB10))
            # Groups handed over and groups draining stay within budget.
            self.assertLessEqual(len(self.mon_groups(MB10)), 2)
        self.assertEqual({P + 'm-' + u for u in uuids}, seen)
        # Every instance stays throttled, monitored or not.
        for uuid in uuids:
            for tid in self.host.vcpu_tids(uuid):
                self.assertEqual(MB10, self.location(tid)[0])

    def fill_rmids(self, leave=0):
        """Take every free RMID with other tools' monitoring groups."""
        made = []
        while True:
            name = 'other-%d' % len(made)
            try:
                os.mkdir(self.path('mon_groups', name))
            except OSError:
                break
            made.append(name)
        for name in made[len(made) - leave:] if leave else []:
            os.rmdir(self.path('mon_groups', name))
        return made

    def test_rmid_exhaustion_never_blocks_a_boot(self):
        self.agent.tick()
        self.fill_rmids()
        a = self.boot(base.shared(10), event=True)
        self.drain()
        # mkdir of the control group failed for lack of an RMID: the
        # instance runs as it is, the agent warns and retries later.
        self.assertEqual('no free CLOSID or RMID',
                         self.agent.placements[a].reason)
        self.assertPlaced(a, None, mon=None)
        self.assertIn('Cannot create', self.logger.output)
        self.assertEqual(0, self.agent.totals['errors'])

    def test_rmids_in_limbo(self):
        self.client.set_limbo_delay(3.0)
        b = self.boot(base.shared(10))
        self.agent.tick()
        made = self.fill_rmids()
        os.rmdir(self.path('mon_groups', made.pop()))     # into limbo
        a = self.boot(base.shared(10), event=True)
        self.drain()
        self.assertEqual('RMIDs busy in limbo',
                         self.agent.placements[a].reason)
        # Throttled at once; monitored once an RMID is free.
        self.assertPlaced(a, MB10, mon=None)
        for _ in range(10):
            os.rmdir(self.path('mon_groups', made.pop()))
        time.sleep(3.2)
        self.agent.tick()
        self.assertPlaced(a, MB10)
        self.assertPlaced(b, MB10)


class TestCycles(base.AgentTestCase):

    def test_200_create_destroy_cycles(self):
        # 200 stops in seconds: the RMIDs they free count as in limbo for
        # a rotation interval (no occupancy was read), and the default
        # minute would rightly pause monitoring after the budget's worth.
        self.flags(rotation_interval=1.0, group='rdt_agent')
        self.agent = self.new_agent()
        live = []
        pcts = (10, 20, 10, 30, None)
        for i in range(200):
            pct = pcts[i % len(pcts)]
            uuid = self.boot(base.shared(pct) if pct else None,
                             event=True, vcpus=1 + i % 3)
            live.append(uuid)
            if len(live) > 3:
                self.destroy(live.pop(0), event=True)
            self.drain()
            if i % 50 == 49:
                self.check(live)
        for uuid in live:
            self.destroy(uuid, event=True)
        self.drain()
        self.assertEqual([], self.groups())
        self.assertEqual([], self.mon_groups())

    def check(self, live):
        wanted = set()
        for uuid in live:
            bw = self.source.domains[uuid].bandwidth
            group = P + 'mb%d' % bw.value if bw else None
            wanted.add(group)
            self.assertPlaced(uuid, group)
        self.assertEqual(sorted(g for g in wanted if g), self.groups())
        mons = [m for g in [None] + self.groups()
                for m in self.mon_groups(g)]
        self.assertEqual(sorted(P + 'm-' + u for u in live), sorted(mons))
