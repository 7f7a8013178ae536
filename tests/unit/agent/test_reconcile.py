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

"""The reconciliation as a table: desired x actual -> actions."""

import testscenarios

from rdt_virt.agent import model as m
from rdt_virt.agent import reconcile
from tests import base
from tests.unit.agent import fakes as f
from tests.unit.policy import hosts

MB10 = f.P + 'mb10'
MB20 = f.P + 'mb20'
S = reconcile.Settings(prefix=f.P)
T1 = f.threads(100)             # vCPU tids 101, 102; pid 100
T2 = f.threads(200)             # 201, 202


def _assign(group, tids, mon=None, uuid=None):
    return m.AssignTasks(group, mon, tuple(tids), uuid=uuid)


# (desired instances, their threads, snapshot, expected actions[, extra])
SCENARIOS = [
    ('cold_start_shared', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(),
        expected=[
            m.CreateGroup(MB10),
            m.WriteSchemata(MB10, 'L3:0=7ff;1=7ff\nMB:0=10;1=10\n'),
            _assign(MB10, [101, 102]),
            m.CreateMonGroup(MB10, f.M1, uuid=f.U1),
            _assign(MB10, [101, 102], f.M1, f.U1)])),
    ('converged_shared', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        expected=[])),
    ('two_instances_share_one_group', dict(
        instances=[f.inst(bw=f.shared(10)),
                   f.inst(f.U2, bw=f.shared(10), dom_id=2)],
        threads={f.U1: T1, f.U2: T2},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        expected=[
            _assign(MB10, [201, 202]),
            m.CreateMonGroup(MB10, f.M2, uuid=f.U2),
            _assign(MB10, [201, 202], f.M2, f.U2)])),
    ('thread_moved_to_root', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101], f.sch(10), {f.M1: [101]})),
        expected=[_assign(MB10, [102]), _assign(MB10, [102], f.M1, f.U1)])),
    ('thread_moved_to_foreign_group', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101], f.sch(10), {f.M1: [101]}),
                        f.group('pqos-batch', [102, 999], f.sch(50))),
        expected=[_assign(MB10, [102]), _assign(MB10, [102], f.M1, f.U1)])),
    ('thread_left_its_mon_group', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101]})),
        expected=[_assign(MB10, [102], f.M1, f.U1)])),
    ('shared_group_schemata_drift', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(100),
                                {f.M1: [101, 102]})),
        expected=[m.WriteSchemata(MB10, 'MB:0=10;1=10\n')])),
    ('percent_rounded_like_the_kernel', dict(
        instances=[f.inst(bw=f.shared(15))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB20, [101, 102], f.sch(20),
                                {f.M1: [101, 102]})),
        expected=[])),
    ('instance_gone_groups_removed', dict(
        instances=[], threads={},
        snapshot=f.snap(f.group(MB10, [], f.sch(10), {f.M1: []}),
                        f.group(f.I1, [], f.sch(500)),
                        root_mons={f.M2: []}),
        expected=[m.RemoveMonGroup(MB10, f.M1),
                  m.RemoveMonGroup(None, f.M2),
                  m.RemoveGroup(f.I1), m.RemoveGroup(MB10)])),
    ('group_with_foreign_task_kept', dict(
        instances=[], threads={},
        snapshot=f.snap(f.group(MB10, [4242], f.sch(10),
                                {f.M1: []})),
        expected=[m.RemoveMonGroup(MB10, f.M1)],
        warnings=1)),
    ('foreign_groups_untouched', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(
            f.group(MB10, [101, 102], f.sch(10), {f.M1: [101, 102]}),
            f.group('pqos-0', [7, 8], f.sch(30)),
            f.group('qemu-9-other-vcpus_0', [9], f.sch(40)),
            f.group(f.P + 'unknown', [], f.sch(40)),
            root_mons={'collectd-1': [11]}),
        expected=[])),
    ('default_group_ways', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        settings=reconcile.Settings(prefix=f.P, default_l3_ways=3),
        expected=[m.WriteSchemata(None, 'L3:0=7;1=7\n'),
                  m.WriteSchemata(MB10, 'L3:0=7;1=7\n')])),
    ('mpam_pool_of_the_control_group_is_full', dict(
        # 2 PMGs per CLOSID: MB10 itself and M1 use them; a second
        # monitoring group would get ENOSPC from alloc_rmid(closid).
        instances=[f.inst(f.U2, bw=f.shared(10), dom_id=2),
                   f.inst(bw=f.shared(10))],
        threads={f.U1: T1, f.U2: T2}, caps=hosts.MPAM,
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        expected=[_assign(MB10, [201, 202])],
        reason=reconcile.R_POOL % (MB10, 1))),
    ('mpam_pool_counts_foreign_monitoring_groups', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        caps=hosts.MPAM,
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {'collectd-1': []})),
        expected=[],
        reason=reconcile.R_POOL % (MB10, 1))),
    ('per_instance_mbps_own_group_no_mon_group', dict(
        instances=[f.inst(bw=f.mbps(500))], threads={f.U1: T1},
        caps=hosts.MBPS,
        snapshot=f.snap(root={'L3': {0: 0x7ff, 1: 0x7ff},
                              'MB': {0: 2 ** 32 - 1, 1: 2 ** 32 - 1}}),
        expected=[
            m.CreateGroup(f.I1, uuid=f.U1),
            m.WriteSchemata(f.I1, 'L3:0=7ff;1=7ff\nMB:0=500;1=500\n'),
            _assign(f.I1, [101, 102])],
        counters=(f.I1, None))),
    ('mbps_rounded_up_by_older_kernels_is_converged', dict(
        # Kernels before the bw_validate fix show 505 MBps as 510.
        instances=[f.inst(bw=f.mbps(505))], threads={f.U1: T1},
        caps=hosts.MBPS,
        snapshot=f.snap(f.group(f.I1, [101, 102], f.sch(510)),
                        root={'L3': {0: 0x7ff, 1: 0x7ff},
                              'MB': {0: 2 ** 32 - 1, 1: 2 ** 32 - 1}}),
        expected=[], counters=(f.I1, None))),
    ('mbps_libvirt_allocation_rounded_up_is_converged', dict(
        instances=[f.inst(bw=f.mbps(805), allocs=[f.alloc()])],
        threads={f.U1: T1}, caps=hosts.MBPS,
        snapshot=f.snap(f.group(f.LV1, [101, 102], {
            'L3': {0: 0x400, 1: 0x400}, 'MB': {0: 810, 1: 810}})),
        expected=[])),
    ('mbps_drift_still_repaired', dict(
        instances=[f.inst(bw=f.mbps(505))], threads={f.U1: T1},
        caps=hosts.MBPS,
        snapshot=f.snap(f.group(f.I1, [101, 102], f.sch(520)),
                        root={'L3': {0: 0x7ff, 1: 0x7ff},
                              'MB': {0: 2 ** 32 - 1, 1: 2 ** 32 - 1}}),
        expected=[m.WriteSchemata(f.I1, 'MB:0=505;1=505\n')])),
    ('libvirt_allocation_converged', dict(
        instances=[f.inst(allocs=[f.alloc(bandwidth={0: 20, 1: 20})])],
        threads={f.U1: T1},
        snapshot=f.snap(f.group(f.LV1, [101, 102], {
            'L3': {0: 0x400, 1: 0x400}, 'MB': {0: 20, 1: 20}})),
        expected=[], counters=(f.LV1, None))),
    ('libvirt_allocation_mb_drift_and_thread', dict(
        instances=[f.inst(allocs=[f.alloc(bandwidth={0: 20, 1: 20})])],
        threads={f.U1: T1},
        snapshot=f.snap(f.group(f.LV1, [101], {
            'L3': {0: 0x400, 1: 0x400}, 'MB': {0: 100, 1: 20}})),
        expected=[m.WriteSchemata(f.LV1, 'MB:0=20\n'),
                  _assign(f.LV1, [102])])),
    ('libvirt_allocation_restored_after_remount', dict(
        instances=[f.inst(allocs=[f.alloc(bandwidth={0: 20, 1: 20})])],
        threads={f.U1: T1},
        snapshot=f.snap(root={'L3': {0: 0xff, 1: 0xff},
                              'MB': {0: 100, 1: 100}}),
        expected=[
            m.CreateGroup(f.LV1, libvirt=True, uuid=f.U1),
            m.WriteSchemata(f.LV1, 'L3:0=100;1=100\nMB:0=20;1=20\n'),
            _assign(f.LV1, [101, 102])])),
    ('libvirt_allocation_no_room_to_restore', dict(
        instances=[f.inst(allocs=[f.alloc()])], threads={f.U1: T1},
        snapshot=f.snap(),
        expected=[], warnings=1, reason=reconcile.R_PENDING)),
    ('libvirt_allocation_gets_mbps_line', dict(
        instances=[f.inst(bw=f.mbps(800), allocs=[f.alloc()])],
        threads={f.U1: T1}, caps=hosts.MBPS,
        snapshot=f.snap(f.group(f.LV1, [101, 102], {
            'L3': {0: 0x400, 1: 0x400},
            'MB': {0: 2 ** 32 - 1, 1: 2 ** 32 - 1}})),
        expected=[m.WriteSchemata(f.LV1, 'MB:0=800;1=800\n')])),
    ('memorytune_percent_is_libvirts', dict(
        instances=[f.inst(bw=f.libvirt_bw(30),
                          allocs=[f.alloc(kib=0,
                                          bandwidth={0: 30, 1: 30})])],
        threads={f.U1: T1},
        snapshot=f.snap(f.group(f.LV1, [101, 102], {
            'L3': {0: 0x7ff, 1: 0x7ff}, 'MB': {0: 30, 1: 30}})),
        expected=[])),
    ('rotated_out_mon_group_removed', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        window=frozenset(),
        expected=[m.RemoveMonGroup(MB10, f.M1)],
        reason=reconcile.R_ROTATED)),
    ('rotated_out_mon_group_drains_before_removal', dict(
        # Its RMID's occupancy is above the threshold: the threads go
        # back to the control group, the group stays until it drains.
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        window=frozenset(), draining=frozenset([f.M1]),
        expected=[_assign(MB10, [101, 102])],
        reason=reconcile.R_ROTATED)),
    ('stopped_instance_mon_group_drains', dict(
        instances=[], threads={},
        snapshot=f.snap(f.group(MB10, [], f.sch(10), {f.M1: []})),
        draining=frozenset([f.M1]),
        expected=[m.RemoveGroup(MB10)])),
    ('blocked_shared_group_not_created', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(), blocked={MB10: 'no free CLOSID or RMID'},
        expected=[], reason='no free CLOSID or RMID')),
    ('blocked_group_threads_leave_a_stale_group', dict(
        # Its policy changed to 20% and the kernel refused the new group:
        # it must not stay under another instance's 10%, which the
        # published placement (no group) would not even show.
        instances=[f.inst(bw=f.shared(20)),
                   f.inst(f.U2, bw=f.shared(10), dom_id=2)],
        threads={f.U1: T1, f.U2: T2},
        snapshot=f.snap(f.group(MB10, [101, 102, 201, 202], f.sch(10),
                                {f.M1: [101, 102], f.M2: [201, 202]})),
        blocked={MB20: 'no free CLOSID or RMID'},
        expected=[_assign(None, [101, 102]),
                  m.RemoveMonGroup(MB10, f.M1)],
        reason='no free CLOSID or RMID')),
    ('blocked_mon_group_not_created', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10))),
        blocked={f.M1: 'no free RMID'},
        expected=[], reason='no free RMID')),
    ('percentage_changed_mon_group_follows', dict(
        instances=[f.inst(bw=f.shared(20))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        expected=[
            m.CreateGroup(MB20),
            m.WriteSchemata(MB20, 'L3:0=7ff;1=7ff\nMB:0=20;1=20\n'),
            m.MoveMonGroup(f.M1, MB10, MB20, (101, 102), uuid=f.U1),
            m.RemoveGroup(MB10)])),
    ('policy_removed_threads_back_to_root', dict(
        instances=[f.inst(monitor=False)], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        expected=[_assign(None, [101, 102]),
                  m.RemoveMonGroup(MB10, f.M1), m.RemoveGroup(MB10)],
        reason=reconcile.R_DISABLED)),
    ('no_policy_thread_in_foreign_group_left_alone', dict(
        instances=[f.inst()], threads={f.U1: T1},
        snapshot=f.snap(f.group('pqos-0', [101, 102], f.sch(30))),
        expected=[],
        reason=reconcile.R_FOREIGN % 'pqos-0')),
    ('no_policy_monitored_in_default_group', dict(
        instances=[f.inst()], threads={f.U1: T1}, snapshot=f.snap(),
        expected=[m.CreateMonGroup(None, f.M1, uuid=f.U1),
                  _assign(None, [101, 102], f.M1, f.U1)])),
    ('no_policy_not_monitored', dict(
        instances=[f.inst(monitor=False)], threads={f.U1: T1},
        snapshot=f.snap(), expected=[],
        reason=reconcile.R_DISABLED)),
    ('host_without_monitoring', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        caps=hosts.REFERENCE.__class__(
            caches=hosts.REFERENCE.caches, membw=hosts.REFERENCE.membw),
        snapshot=f.snap(),
        expected=[
            m.CreateGroup(MB10),
            m.WriteSchemata(MB10, 'L3:0=7ff;1=7ff\nMB:0=10;1=10\n'),
            _assign(MB10, [101, 102])],
        reason=reconcile.R_NO_MON)),
    ('no_process_yet_nothing_touched', dict(
        instances=[f.inst(bw=f.shared(10))], threads={},
        snapshot=f.snap(f.group(MB10, [], f.sch(10), {f.M1: []})),
        expected=[], reason=reconcile.R_NO_PROCESS)),
    ('extra_threads_placed', dict(
        instances=[f.inst(bw=f.shared(10))],
        threads={f.U1: f.threads(100, others=(100, 150))},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        settings=reconcile.Settings(prefix=f.P, place_extra=True),
        expected=[_assign(MB10, [100, 150]),
                  _assign(MB10, [100, 150], f.M1, f.U1)])),
    ('extra_threads_not_placed_by_default', dict(
        instances=[f.inst(bw=f.shared(10))],
        threads={f.U1: f.threads(100, others=(100, 150))},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        expected=[])),
    ('hotplugged_vcpu', dict(
        instances=[f.inst(bw=f.shared(10))],
        threads={f.U1: f.threads(100, vcpus=3)},
        snapshot=f.snap(f.group(MB10, [101, 102], f.sch(10),
                                {f.M1: [101, 102]})),
        expected=[_assign(MB10, [103]), _assign(MB10, [103], f.M1, f.U1)])),
    ('hotplugged_vcpu_outside_the_allocation', dict(
        instances=[f.inst(allocs=[f.alloc()])],
        threads={f.U1: f.threads(100, vcpus=3)},
        snapshot=f.snap(f.group(f.LV1, [101, 102], {
            'L3': {0: 0x400, 1: 0x400}, 'MB': {0: 100, 1: 100}})),
        expected=[], reason=reconcile.R_SPLIT)),
    ('scoped_snapshot_never_removes', dict(
        instances=[f.inst(bw=f.shared(10))], threads={f.U1: T1},
        snapshot=f.snap(f.group(MB20, [], f.sch(20)), complete=False),
        expected=[
            m.CreateGroup(MB10),
            m.WriteSchemata(MB10, 'L3:0=7ff;1=7ff\nMB:0=10;1=10\n'),
            _assign(MB10, [101, 102]),
            m.CreateMonGroup(MB10, f.M1, uuid=f.U1),
            _assign(MB10, [101, 102], f.M1, f.U1)])),
    ('scoped_snapshot_cannot_restore_libvirt_group', dict(
        instances=[f.inst(allocs=[f.alloc()])], threads={f.U1: T1},
        snapshot=f.snap(complete=False), expected=[], needs_full=True,
        reason=reconcile.R_PENDING)),
    ('cdp_host_restores_code_and_data', dict(
        instances=[f.inst(allocs=[f.alloc(cache_ids=(0,))])],
        threads={f.U1: T1}, caps=hosts.CDP,
        snapshot=f.snap(root={'L3CODE': {0: 0xff, 1: 0xff},
                              'L3DATA': {0: 0xff, 1: 0xff},
                              'MB': {0: 100, 1: 100}}),
        expected=[
            m.CreateGroup(f.LV1, libvirt=True, uuid=f.U1),
            m.WriteSchemata(f.LV1, 'L3CODE:0=100;1=ff\nL3DATA:0=100;1=ff\n'
                                   'MB:0=100;1=100\n'),
            _assign(f.LV1, [101, 102])])),
]


class TestPlan(testscenarios.WithScenarios, base.TestCase):

    scenarios = SCENARIOS
    caps = hosts.REFERENCE
    settings = S
    window = None
    blocked = None
    draining = ()
    warnings = 0
    needs_full = False
    reason = None
    counters = None

    def test_plan(self):
        instances = {i.uuid: i for i in self.instances}
        result = reconcile.plan(instances, self.threads, self.snapshot,
                                self.caps, self.settings, self.window,
                                self.blocked, self.draining)
        self.assertEqual(self.expected, result.actions)
        self.assertEqual(self.warnings, len(result.warnings),
                         result.warnings)
        self.assertEqual(self.needs_full, result.needs_full)
        if self.instances:
            place = result.placements[self.instances[0].uuid]
            self.assertEqual(self.reason, place.reason)
            if self.counters is not None:
                self.assertEqual(self.counters, place.counters)

    def test_applying_the_plan_converges(self):
        # Replay the actions on the snapshot; planning again is a no-op.
        instances = {i.uuid: i for i in self.instances}
        result = reconcile.plan(instances, self.threads, self.snapshot,
                                self.caps, self.settings, self.window,
                                self.blocked, self.draining)
        after = _apply(self.snapshot, result.actions)
        again = reconcile.plan(instances, self.threads, after, self.caps,
                               self.settings, self.window, self.blocked,
                               self.draining)
        self.assertEqual([], again.actions)


def _apply(snap, actions):
    """A tiny kernel model: what the actions do to a snapshot."""
    from rdt_virt.resctrl import schemata as sch_mod

    groups = {name: m.GroupState(g.name, set(g.tasks), dict(
        g.schemata or {}), {k: set(v) for k, v in g.mon_groups.items()},
        set(g.mon_names)) for name, g in snap.groups.items()}

    def leave(tid):
        for g in groups.values():
            g.tasks.discard(tid)
            for tasks in g.mon_groups.values():
                tasks.discard(tid)

    for a in actions:
        if isinstance(a, m.CreateGroup):
            groups[a.group] = m.GroupState(a.group, set(), {}, {}, set())
        elif isinstance(a, m.RemoveGroup):
            del groups[a.group]
        elif isinstance(a, m.WriteSchemata):
            groups[a.group].schemata = sch_mod.merge(
                groups[a.group].schemata, sch_mod.parse(a.text))
        elif isinstance(a, m.CreateMonGroup):
            groups[a.group].mon_groups[a.mon_group] = set()
            groups[a.group].mon_names.add(a.mon_group)
        elif isinstance(a, m.RemoveMonGroup):
            groups[a.group].mon_groups.pop(a.mon_group)
            groups[a.group].mon_names.discard(a.mon_group)
        elif isinstance(a, m.MoveMonGroup):
            tasks = groups[a.group].mon_groups.pop(a.mon_group)
            groups[a.group].mon_names.discard(a.mon_group)
            for tid in tasks:
                leave(tid)
                if a.new_group is not None:
                    groups[a.new_group].tasks.add(tid)
            groups[a.new_group].mon_groups[a.mon_group] = set(tasks)
            groups[a.new_group].mon_names.add(a.mon_group)
        elif isinstance(a, m.AssignTasks):
            for tid in a.tids:
                if a.mon_group is None:
                    leave(tid)
                    if a.group is not None:
                        groups[a.group].tasks.add(tid)
                else:
                    for tasks in groups[a.group].mon_groups.values():
                        tasks.discard(tid)
                    groups[a.group].mon_groups[a.mon_group].add(tid)
    return m.Snapshot({n: m.GroupState(g.name, frozenset(g.tasks),
                                       g.schemata,
                                       {k: frozenset(v) for k, v in
                                        g.mon_groups.items()},
                                       frozenset(g.mon_names))
                       for n, g in groups.items()}, snap.complete)


class TestValues(base.TestCase):

    def test_default_masks(self):
        self.assertEqual({'L3': {0: 0xf, 1: 0xf}},
                         reconcile.default_masks(hosts.REFERENCE, 4))
        self.assertEqual({}, reconcile.default_masks(hosts.REFERENCE, 0))
        # All ways (or more) cannot leave room for anyone: not applied.
        self.assertEqual({}, reconcile.default_masks(hosts.REFERENCE, 11))
        self.assertEqual({'L3CODE': {0: 0x3, 1: 0x3},
                          'L3DATA': {0: 0x3, 1: 0x3}},
                         reconcile.default_masks(hosts.CDP, 2))

    def test_default_masks_shareable_bits_kept_when_contiguous(self):
        import dataclasses
        l3 = dataclasses.replace(hosts.REFERENCE.caches['L3'],
                                 shareable_bits=0x600)
        caps = dataclasses.replace(hosts.REFERENCE, caches={'L3': l3})
        # 0x3 | 0x600 would have a hole: the shareable bits stay out.
        self.assertEqual(0x3, reconcile.default_masks(caps, 2)['L3'][0])
        l3 = dataclasses.replace(l3, shareable_bits=0x1)
        caps = dataclasses.replace(hosts.REFERENCE, caches={'L3': l3})
        self.assertEqual(0x3, reconcile.default_masks(caps, 2)['L3'][0])

    def test_expected_mb(self):
        self.assertEqual(10, reconcile.expected_mb(hosts.REFERENCE, 5))
        self.assertEqual(20, reconcile.expected_mb(hosts.REFERENCE, 15))
        self.assertEqual(100, reconcile.expected_mb(hosts.REFERENCE, 100))
        self.assertEqual(1234, reconcile.expected_mb(hosts.MBPS, 1234))

    def test_is_libvirt_group(self):
        self.assertTrue(reconcile.is_libvirt_group(
            'qemu-12-instance-0000000c-vcpus_0-3'))
        for name in ('rdtvirt-mb10', 'qemu-x-y', 'qemu-', None, '',
                     'qemu-1-a/b'):
            self.assertFalse(reconcile.is_libvirt_group(name), name)

    def test_candidate_parents(self):
        instances = {f.U1: f.inst(bw=f.shared(10)),
                     f.U2: f.inst(f.U2, bw=f.shared(10), dom_id=2),
                     f.U3: f.inst(f.U3, dom_id=3)}
        self.assertEqual(2, reconcile.candidate_parents(
            instances, [f.U1, f.U2, f.U3], hosts.MPAM, S))
        self.assertEqual(1, reconcile.candidate_parents(
            instances, [f.U3], hosts.MPAM, S))
        self.assertEqual(0, reconcile.candidate_parents(
            instances, [], hosts.MPAM, S))

    def test_mon_candidates(self):
        instances = {
            f.U1: f.inst(bw=f.shared(10)),
            f.U2: f.inst(f.U2, bw=f.mbps(100)),
            f.U3: f.inst(f.U3, monitor=False)}
        threads = {f.U1: T1, f.U2: T2, f.U3: f.threads(300)}
        self.assertEqual([f.U1], reconcile.mon_candidates(
            instances, threads, hosts.REFERENCE, S))
        self.assertEqual([], reconcile.mon_candidates(
            instances, threads, hosts.L3_CAT, S))

    def test_groups_of(self):
        self.assertEqual({MB10}, reconcile.groups_of(
            f.inst(bw=f.shared(10)), hosts.REFERENCE, S))
        self.assertEqual({f.LV1}, reconcile.groups_of(
            f.inst(allocs=[f.alloc()]), hosts.REFERENCE, S))
        self.assertEqual(set(), reconcile.groups_of(f.inst(),
                                                    hosts.REFERENCE, S))

    def test_not_mounted(self):
        result = reconcile.plan({}, {}, m.Snapshot({}), hosts.REFERENCE, S)
        self.assertEqual([], result.actions)
        self.assertEqual(['resctrl is not mounted'], result.warnings)


class TestCleanup(base.TestCase):

    def cleanup(self, snap, remaining=()):
        return reconcile.cleanup(
            f.U1, f.inst(bw=f.shared(10)), snap, hosts.REFERENCE, S,
            {i.uuid: i for i in remaining})

    def test_last_instance_of_a_shared_group(self):
        actions, warnings = self.cleanup(f.snap(
            f.group(MB10, [], f.sch(10), {f.M1: [], f.M2: []})))
        self.assertEqual([m.RemoveMonGroup(MB10, f.M1),
                          m.RemoveGroup(MB10)], actions)
        self.assertEqual([], warnings)

    def test_group_still_needed(self):
        actions, _w = self.cleanup(
            f.snap(f.group(MB10, [201], f.sch(10), {f.M1: [], f.M2: [201]})),
            remaining=[f.inst(f.U2, bw=f.shared(10))])
        self.assertEqual([m.RemoveMonGroup(MB10, f.M1)], actions)

    def test_threads_still_there(self):
        actions, warnings = self.cleanup(f.snap(
            f.group(MB10, [101], f.sch(10), {f.M1: [101]})))
        self.assertEqual([], actions)
        self.assertEqual(2, len(warnings))

    def test_nothing_left(self):
        self.assertEqual(([], []), self.cleanup(f.snap()))
