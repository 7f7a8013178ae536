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

import dataclasses
import json

from rdt_virt import exception
from rdt_virt.policy import capacity
from rdt_virt.policy import extra_specs as es
from rdt_virt.policy import fit
from rdt_virt.policy import groups
from rdt_virt.policy import hoststats
from tests import base
from tests.unit.policy import hosts

P = es.RDTPolicy
PREFIX = 'rdtvirt-'
UUID = '6f1c8a9e-2b7d-4c1e-9a3f-0d5e7b8c9a10'


def state(root_mask=0x7ff, **groups_):
    """Schemata of the default group and ``groups_`` on the reference."""
    sch = {None: {'L3': {0: root_mask, 1: root_mask},
                  'MB': {0: 100, 1: 100}}}
    for name, mask in groups_.items():
        sch[name.replace('_', '-')] = {'L3': {0: mask, 1: mask},
                                       'MB': {0: 10, 1: 10}}
    return sch


class TestFromState(base.TestCase):

    def test_fresh_mount_has_no_free_ways(self):
        cap = capacity.from_state(hosts.REFERENCE, state(), 0, PREFIX)
        self.assertEqual(7, cap.free_closids)     # 8 MB CLOSIDs - default
        self.assertEqual(175, cap.free_rmids)
        self.assertEqual(0, cap.largest_free_run('L3', 0))
        self.assertEqual(frozenset(), cap.shared_groups)

    def test_counts_groups_ways_and_shared(self):
        sch = state(0x003, rdtvirt_mb10=0x003, qemu_1_vm_vcpus_0=0x030,
                    other=0x003)
        cap = capacity.from_state(hosts.REFERENCE, sch, 5, PREFIX)
        self.assertEqual(4, cap.free_closids)
        self.assertEqual(176 - 1 - 3 - 5, cap.free_rmids)
        # Free: bits 2-3 and 6-10.
        self.assertEqual({0: 0x7cc, 1: 0x7cc}, cap.free_masks['L3'])
        self.assertEqual(5, cap.largest_free_run('L3', 1))
        self.assertEqual(frozenset([10]), cap.shared_groups)

    def test_without_monitoring(self):
        cap = capacity.from_state(hosts.L3_CAT, {None: {'L3': {0: 1, 1: 1}}},
                                  0, PREFIX)
        self.assertIsNone(cap.free_rmids)
        self.assertEqual(15, cap.free_closids)


class TestCheckAndClaim(base.TestCase):

    def setUp(self):
        super().setUp()
        # Default group keeps 2 ways; 9 free ways on each cache id.
        self.cap = capacity.from_state(hosts.REFERENCE, state(0x003), 0,
                                       PREFIX)

    def plan(self, strategy='per-instance', **kw):
        return fit.fit(P(**kw), hosts.REFERENCE, strategy)

    def test_closids_run_out_after_seven_per_instance_groups(self):
        cap = self.cap
        for _ in range(7):
            cap = cap.claim(self.plan(mem_bw=10))
        self.assertEqual(0, cap.free_closids)
        exc = self.assertRaises(exception.CapacityExhausted, cap.claim,
                                self.plan(mem_bw=10))
        self.assertIn('no free CLOSID', exc.reason)
        # Plans without a group of their own still fit.
        cap.check(self.plan())

    def test_shared_groups_need_one_closid_per_percentage(self):
        cap = self.cap
        for _ in range(100):
            cap = cap.claim(self.plan('shared', mem_bw=10))
        self.assertEqual(6, cap.free_closids)
        cap = cap.claim(self.plan('shared', mem_bw=20))
        self.assertEqual(5, cap.free_closids)
        self.assertEqual(frozenset([10, 20]), cap.shared_groups)

    def test_rmids_gate_new_control_groups(self):
        cap = capacity.Capacity(free_closids=3, free_rmids=0,
                                free_masks={'L3': {0: 0x7fc, 1: 0x7fc}})
        exc = self.assertRaises(exception.CapacityExhausted, cap.check,
                                self.plan(mem_bw=10))
        self.assertIn('no free RMID', exc.reason)
        cap.check(self.plan(monitor=True))

    def test_ways_best_fit_and_exhaustion(self):
        cap = self.cap.claim(self.plan(cache_l3=4096))       # 2 ways
        self.assertEqual({0: 0x7f0, 1: 0x7f0}, cap.free_masks['L3'])
        cap = cap.claim(self.plan(cache_l3=5 * 3328))        # 5 ways
        self.assertEqual(0x600, cap.free_masks['L3'][0])
        exc = self.assertRaises(exception.CapacityExhausted, cap.claim,
                                self.plan(cache_l3=3 * 3328))
        self.assertIn('L3 cache 0 has no 3 contiguous free ways (the '
                      'longest free run is 2)', exc.reason)
        cap.claim(self.plan(cache_l3=2 * 3328))

    def test_best_fit_prefers_the_smallest_run(self):
        # Free runs: bits 2-3 (2 ways) and 6-10 (5 ways).
        cap = capacity.Capacity(free_closids=5, free_rmids=None,
                                free_masks={'L3': {0: 0x7cc, 1: 0x7cc}})
        cap = cap.claim(self.plan(cache_l3=4096))
        self.assertEqual(0x7c0, cap.free_masks['L3'][0])

    def test_claim_does_not_change_the_original(self):
        self.cap.claim(self.plan(cache_l3=4096, mem_bw=10))
        self.assertEqual(7, self.cap.free_closids)
        self.assertEqual(0x7fc, self.cap.free_masks['L3'][0])


class TestHostStats(base.TestCase):

    def test_round_trip_every_variant(self):
        for caps in (hosts.REFERENCE, hosts.CDP, hosts.MBPS, hosts.AMD,
                     hosts.L3_CAT, hosts.MONITORING, hosts.NONE, hosts.AET,
                     hosts.MPAM):
            sch = {None: {name: {d: res.cbm_mask & 0x3
                                 for d in res.domain_ids}
                          for name, res in caps.caches.items()}}
            cap = capacity.from_state(caps, sch, 2, PREFIX)
            host = hoststats.HostRDT(caps, cap, 'shared', False, 1.5e9)
            stats = hoststats.encode(host)
            self.assertEqual([hoststats.KEY], list(stats))
            self.assertIsInstance(stats[hoststats.KEY], str)
            back = hoststats.decode(stats)
            self.assertEqual(cap, back.capacity)
            self.assertEqual(('shared', False, 1.5e9),
                             (back.strategy, back.monitoring, back.mbw))
            self.assertEqual(caps.features, back.caps.features)
            self.assertEqual(caps.num_closids, back.caps.num_closids)
            self.assertEqual(caps.num_rmids, back.caps.num_rmids)
            for name, res in caps.caches.items():
                self.assertEqual(res, back.caps.caches[name])
            for name, res in caps.membw.items():
                self.assertEqual(
                    (res.unit, res.min_bandwidth, res.bandwidth_gran,
                     res.domain_ids),
                    (back.caps.membw[name].unit,
                     back.caps.membw[name].min_bandwidth,
                     back.caps.membw[name].bandwidth_gran,
                     back.caps.membw[name].domain_ids))

    def test_classes_round_trip(self):
        cap = capacity.from_state(hosts.REFERENCE, {None: {}}, 0, PREFIX)
        host = hoststats.HostRDT(hosts.REFERENCE, cap, 'shared', True,
                                 classes={0: (2, 1), 1: (0, 3)})
        back = hoststats.decode(hoststats.encode(host))
        self.assertEqual({0: (2, 1), 1: (0, 3)}, back.classes)
        self.assertEqual((2, 3), (back.most_high, back.most_low))

    def test_stats_without_classes_have_none(self):
        # Stats of a driver from before the classes.
        cap = capacity.from_state(hosts.REFERENCE, {None: {}}, 0, PREFIX)
        stats = hoststats.encode(hoststats.HostRDT(
            hosts.REFERENCE, cap, 'shared', True))
        doc = json.loads(stats[hoststats.KEY])
        del doc['classes']
        back = hoststats.decode({hoststats.KEY: json.dumps(doc)})
        self.assertEqual({}, back.classes)
        self.assertEqual(0, back.most_high)

    def test_claimed_instances_round_trip(self):
        cap = capacity.from_state(hosts.REFERENCE, {None: {}}, 0, PREFIX)
        uuids = frozenset(['b-uuid', 'a-uuid'])
        stats = hoststats.encode(hoststats.HostRDT(
            hosts.REFERENCE, cap, 'shared', True, claimed=uuids))
        self.assertEqual(['a-uuid', 'b-uuid'],
                         json.loads(stats[hoststats.KEY])['claimed'])
        self.assertEqual(uuids, hoststats.decode(stats).claimed)
        # None stays unnamed, and an empty set is not None.
        for claimed in (None, frozenset()):
            back = hoststats.decode(hoststats.encode(hoststats.HostRDT(
                hosts.REFERENCE, cap, 'shared', True, claimed=claimed)))
            self.assertEqual(claimed, back.claimed)

    def test_stats_without_claimed_names_none(self):
        # Stats of a driver from before the names, and of a report taken
        # as an instance left.
        cap = capacity.from_state(hosts.REFERENCE, {None: {}}, 0, PREFIX)
        stats = hoststats.encode(hoststats.HostRDT(
            hosts.REFERENCE, cap, 'shared', True))
        self.assertNotIn('claimed', json.loads(stats[hoststats.KEY]))
        self.assertIsNone(hoststats.decode(stats).claimed)

    def test_count_classes(self):
        self.assertEqual({}, hoststats.count_classes(
            ['normal', 'normal'], (0, 1)))
        self.assertEqual({0: (2, 1), 1: (2, 1)}, hoststats.count_classes(
            ['high', 'low', 'normal', 'high'], (0, 1)))
        self.assertEqual({}, hoststats.count_classes(['high'], ()))
        added = hoststats.add_instance({0: (1, 0)}, 'low', (0, 1))
        self.assertEqual({0: (1, 1), 1: (0, 1)}, added)
        self.assertEqual({0: (1, 0)},
                         hoststats.add_instance({0: (1, 0)}, 'normal',
                                                (0, 1)))

    def test_decoded_host_fits_like_the_original(self):
        cap = capacity.from_state(hosts.REFERENCE, state(0x003), 0, PREFIX)
        back = hoststats.decode(hoststats.encode(
            hoststats.HostRDT(hosts.REFERENCE, cap, 'per-instance', True)))
        policy = P(cache_l3=4096, mem_bw=15)
        self.assertEqual(fit.fit(policy, hosts.REFERENCE),
                         fit.fit(policy, back.caps))

    def test_new_hardware_survives_the_stats(self):
        for caps in (hosts.AET, hosts.MPAM):
            cap = capacity.from_state(caps, {None: {}}, 0, PREFIX)
            back = hoststats.decode(hoststats.encode(
                hoststats.HostRDT(caps, cap, 'shared', True)))
            self.assertEqual(caps.package_monitor, back.caps.package_monitor)
            self.assertEqual(caps.rmids_per_closid,
                             back.caps.rmids_per_closid)
            self.assertEqual(caps.rmid_limit, back.caps.rmid_limit)

    def test_aet_free_rmids_from_the_smallest_pool(self):
        # 576 RMIDs handed out, not L3_MON's 1024: the default group's,
        # one control group's and 5 monitoring groups' are taken.
        cap = capacity.from_state(hosts.AET, {None: {}, 'g': {}}, 5, PREFIX)
        self.assertEqual(576 - 1 - 1 - 5, cap.free_rmids)

    def test_closids_the_kernel_takes_survive_the_stats(self):
        # 64 CLOSIDs in info/, 32 usable before 6.16, one of them for I/O.
        l3 = dataclasses.replace(hosts.AMD.caches['L3'], num_closids=64)
        mbs = {n: dataclasses.replace(r, num_closids=64)
               for n, r in hosts.AMD.membw.items()}
        caps = dataclasses.replace(hosts.AMD, caches={'L3': l3}, membw=mbs,
                                   closid_limit=32, io_alloc=True)
        cap = capacity.from_state(caps, {None: {}}, 0, PREFIX)
        self.assertEqual(30, cap.free_closids)
        back = hoststats.decode(hoststats.encode(
            hoststats.HostRDT(caps, cap, 'per-instance', True)))
        self.assertEqual((31, 32), (back.caps.num_closids,
                                    back.caps.kernel_closids))
        self.assertEqual((32, True), (back.caps.closid_limit,
                                      back.caps.io_alloc))

    def test_decoded_amd_host_keeps_the_hardware_unlimited_value(self):
        # CPUID gives 1 << bw_len; a 12-bit field makes 4096 unlimited,
        # so 300000 MBps (2400 units) is a throttle, not a cap at 2048.
        mb = dataclasses.replace(hosts.AMD.mb, max_value=4096)
        caps = dataclasses.replace(hosts.AMD, membw={'MB': mb})
        cap = capacity.from_state(caps, {None: {}}, 0, PREFIX)
        back = hoststats.decode(hoststats.encode(
            hoststats.HostRDT(caps, cap, 'per-instance', True)))
        self.assertEqual(4096, back.caps.mb.max_bandwidth)
        policy = P(mem_bw_mbps=300000)
        self.assertEqual(2400, fit.fit(policy, caps).mem_bw.value)
        self.assertEqual(fit.fit(policy, caps), fit.fit(policy, back.caps))

    def test_garbage_and_absent(self):
        for stats in ({}, None, {'rdt_virt': ''}, {'rdt_virt': '{'},
                      {'rdt_virt': '{"v": 99}'}, {'rdt_virt': '[]'},
                      {'rdt_virt': '{"v": 1}'}):
            self.assertIsNone(hoststats.decode(stats), stats)


class TestGroupNames(base.TestCase):

    def test_names_and_parse(self):
        self.assertEqual('rdtvirt-mb10', groups.shared_group(PREFIX, 10))
        self.assertEqual('rdtvirt-i-' + UUID,
                         groups.instance_group(PREFIX, UUID.upper()))
        self.assertEqual('rdtvirt-m-' + UUID,
                         groups.mon_group(PREFIX, '{%s}' % UUID))
        self.assertEqual(('shared', 10), groups.parse(PREFIX,
                                                      'rdtvirt-mb10'))
        self.assertEqual(('instance', UUID),
                         groups.parse(PREFIX, 'rdtvirt-i-' + UUID))
        self.assertEqual(('monitor', UUID),
                         groups.parse(PREFIX, 'rdtvirt-m-' + UUID))
        for name in ('qemu-1-vm-vcpus_0', 'rdtvirt-x', 'rdtvirt-i-nope',
                     'rdtvirt-mb', 'rdtvirt-mb1000', 'pqos-mb10'):
            self.assertIsNone(groups.parse(PREFIX, name), name)

    def test_rejects_non_uuids(self):
        for bad in ('../../etc', 'vm1', '', 'a/b'):
            self.assertRaises(exception.InvalidGroupName,
                              groups.instance_group, PREFIX, bad)


class TestDefaultGroup(base.TestCase):

    def test_reserved_masks(self):
        from rdt_virt.policy import default_group as dg

        self.assertEqual({}, dg.reserved_schemata(hosts.REFERENCE, 0))
        self.assertEqual({'L3': {0: 0x3, 1: 0x3}},
                         dg.reserved_schemata(hosts.REFERENCE, 2))
        self.assertEqual({'L3CODE': {0: 0x7, 1: 0x7},
                          'L3DATA': {0: 0x7, 1: 0x7}},
                         dg.reserved_schemata(hosts.CDP, 3))
        self.assertEqual({}, dg.reserved_schemata(hosts.MONITORING, 2))
        exc = self.assertRaises(exception.InvalidConfig,
                                dg.reserved_schemata, hosts.REFERENCE, 11)
        self.assertIn('L3 has only 11 ways', str(exc))
        from rdt_virt.resctrl import info
        caps = info.HostCapabilities(caches={'L3': hosts._l3(min_bits=2)})
        exc = self.assertRaises(exception.InvalidConfig,
                                dg.reserved_schemata, caps, 1)
        self.assertIn('at least 2 ways', str(exc))

    def test_mpam_shareable_placeholder_is_ignored(self):
        # mpam_resctrl.c reports every portion shareable: keeping them
        # would leave the default group the whole cache.
        import dataclasses

        from rdt_virt.policy import default_group as dg
        l3 = dataclasses.replace(hosts._l3(mask=0xffff), shareable_bits=0xffff,
                                 sparse_masks=True)
        caps = dataclasses.replace(hosts.MPAM, caches={'L3': l3})
        self.assertEqual({'L3': {0: 0x3, 1: 0x3}},
                         dg.reserved_schemata(caps, 2))
        # A real I/O share (Intel's top ways) is still kept where valid.
        intel = dataclasses.replace(l3, shareable_bits=0xc000)
        caps = dataclasses.replace(hosts.MPAM, caches={'L3': intel})
        self.assertEqual({'L3': {0: 0xc003, 1: 0xc003}},
                         dg.reserved_schemata(caps, 2))

    def test_needs_update(self):
        from rdt_virt.policy import default_group as dg

        reserved = dg.reserved_schemata(hosts.REFERENCE, 2)
        self.assertTrue(dg.needs_update(state()[None], reserved))
        self.assertFalse(dg.needs_update(state(0x3)[None], reserved))
        self.assertFalse(dg.needs_update(state()[None], {}))
