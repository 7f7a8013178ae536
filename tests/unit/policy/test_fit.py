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

from rdt_virt import exception
from rdt_virt.policy import extra_specs as es
from rdt_virt.policy import fit
from rdt_virt.resctrl import info
from tests import base
from tests.unit.policy import hosts

P = es.RDTPolicy
PER = 'per-instance'
SHARED = 'shared'


class TestMemBw(base.TestCase):

    # (policy, host, expected (unit, value) or error fragment)
    TABLE = [
        (P(mem_bw=10), hosts.REFERENCE, (info.UNIT_PERCENT, 10)),
        (P(mem_bw=5), hosts.REFERENCE, (info.UNIT_PERCENT, 10)),
        (P(mem_bw=1), hosts.REFERENCE, (info.UNIT_PERCENT, 10)),
        (P(mem_bw=11), hosts.REFERENCE, (info.UNIT_PERCENT, 20)),
        (P(mem_bw=95), hosts.REFERENCE, (info.UNIT_PERCENT, 100)),
        (P(mem_bw=100), hosts.REFERENCE, (info.UNIT_PERCENT, 100)),
        (P(mem_bw=10), hosts.L3_CAT, 'no memory bandwidth allocation'),
        (P(mem_bw=10), hosts.NONE, 'no memory bandwidth allocation'),
        (P(mem_bw=10), hosts.MBPS, 'mounted with mba_MBps'),
        (P(mem_bw=10), hosts.AMD, 'absolute units (AMD)'),
        (P(mem_bw_mbps=2000), hosts.REFERENCE, 'needs resctrl mounted'),
        (P(mem_bw_mbps=2000), hosts.MBPS, (info.UNIT_MBPS, 2000)),
        (P(mem_bw_mbps=1000), hosts.AMD, (info.UNIT_AMD, 8)),
        (P(mem_bw_mbps=1001), hosts.AMD, (info.UNIT_AMD, 9)),
        (P(mem_bw_mbps=1), hosts.AMD, (info.UNIT_AMD, 1)),
        (P(mem_bw_mbps=10 ** 6), hosts.AMD, (info.UNIT_AMD, 2048)),
    ]

    def test_table(self):
        for policy, host, expected in self.TABLE:
            if isinstance(expected, str):
                exc = self.assertRaises(exception.HostCannotServe,
                                        fit.fit_mem_bw, policy, host)
                self.assertIn(expected, exc.reason, policy)
                continue
            alloc = fit.fit_mem_bw(policy, host)
            self.assertEqual(expected, (alloc.unit, alloc.value), policy)
            self.assertEqual(host.mb.domain_ids, alloc.domain_ids)
            self.assertEqual(policy.mem_bw or policy.mem_bw_mbps,
                             alloc.requested)

    def test_none_without_policy(self):
        self.assertIsNone(fit.fit_mem_bw(P(cache_l3=10), hosts.NONE))


class TestCaches(base.TestCase):

    def test_rounds_up_to_whole_ways(self):
        way_kib = int(hosts.REF_WAY) // 1024          # 3328 KiB
        for kib, ways in [(1, 1), (way_kib, 1), (way_kib + 1, 2),
                          (4096, 2), (3 * way_kib, 3), (11 * way_kib, 11)]:
            (alloc,) = fit.fit_caches(P(cache_l3=kib), hosts.REFERENCE)
            self.assertEqual('L3', alloc.resource)
            self.assertEqual(ways, alloc.ways, kib)
            self.assertEqual(
                ((0, ways, ways * int(hosts.REF_WAY)),
                 (1, ways, ways * int(hosts.REF_WAY))), alloc.domains)

    def test_min_cbm_bits(self):
        caps = info.HostCapabilities(caches={'L3': hosts._l3(min_bits=2)})
        (alloc,) = fit.fit_caches(P(cache_l3=1), caps)
        self.assertEqual(2, alloc.ways)

    def test_more_than_the_cache(self):
        exc = self.assertRaises(exception.HostCannotServe, fit.fit_caches,
                                P(cache_l3=40 * 1024), hosts.REFERENCE)
        self.assertIn('needs 13 ways, cache 0 has 11 ways of 3328 KiB',
                      exc.reason)

    def test_cdp(self):
        code, data = fit.fit_caches(
            P(cache_l3_code=1024, cache_l3_data=8192), hosts.CDP)
        self.assertEqual(('L3CODE', 'code', 1), (code.resource, code.type,
                                                 code.ways))
        self.assertEqual(('L3DATA', 'data', 3), (data.resource, data.type,
                                                 data.ways))

    def test_unserveable(self):
        table = [
            (P(cache_l3=1024), hosts.CDP, 'L3 CDP is enabled on the host'),
            (P(cache_l3=1024), hosts.MONITORING, 'no L3 cache allocation'),
            (P(cache_l3_code=1, cache_l3_data=1), hosts.REFERENCE,
             'need L3 CDP'),
            (P(cache_l3=1024), info.HostCapabilities(
                caches={'L3': hosts._l3(way=None)}), 'size of L3 cache 0'),
        ]
        for policy, host, fragment in table:
            exc = self.assertRaises(exception.HostCannotServe,
                                    fit.fit_caches, policy, host)
            self.assertIn(fragment, exc.reason)


class TestPlan(base.TestCase):

    def test_monitor(self):
        self.assertTrue(fit.fit(P(), hosts.REFERENCE).monitor)
        self.assertFalse(fit.fit(P(), hosts.REFERENCE,
                                 monitoring=False).monitor)
        self.assertTrue(fit.fit(P(monitor=True), hosts.REFERENCE,
                                monitoring=False).monitor)
        self.assertFalse(fit.fit(P(monitor=False), hosts.REFERENCE).monitor)
        # Default-on monitoring quietly does nothing without CMT/MBM...
        self.assertFalse(fit.fit(P(), hosts.L3_CAT).monitor)
        self.assertTrue(fit.fit(P(), hosts.L3_CAT).is_empty)
        # ... but an explicit request filters the host.
        self.assertRaises(exception.HostCannotServe, fit.fit,
                          P(monitor=True), hosts.L3_CAT)

    def test_no_libvirt_group_on_amd(self):
        # libvirt refuses the default group's MB line when min_bandwidth is
        # 0, so it can create no group there; rdt-virt-agent's can.
        for policy in (P(cache_l3=1), P(mem_bw_mbps=500, cache_l3=1)):
            e = self.assertRaises(exception.HostCannotServe, fit.fit,
                                  policy, hosts.AMD)
            self.assertIn('libvirt cannot create resctrl groups', str(e))
        self.assertEqual(fit.MB_INSTANCE, fit.fit(
            P(mem_bw_mbps=500), hosts.AMD).mb_owner)

    def test_mb_owner(self):
        table = [
            (P(mem_bw=10), hosts.REFERENCE, PER, fit.MB_LIBVIRT, True),
            (P(mem_bw=10), hosts.REFERENCE, SHARED, fit.MB_SHARED, False),
            (P(mem_bw=10, cache_l3=1), hosts.REFERENCE, SHARED,
             fit.MB_LIBVIRT, True),
            (P(mem_bw_mbps=500), hosts.MBPS, PER, fit.MB_INSTANCE, False),
            (P(mem_bw_mbps=500), hosts.MBPS, SHARED, fit.MB_INSTANCE, False),
            (P(mem_bw_mbps=500, cache_l3=1), hosts.MBPS, SHARED,
             fit.MB_INSTANCE, True),
            (P(cache_l3=1), hosts.REFERENCE, SHARED, None, True),
            (P(), hosts.REFERENCE, PER, None, False),
        ]
        for policy, host, strategy, owner, libvirt_group in table:
            plan = fit.fit(policy, host, strategy)
            self.assertEqual(owner, plan.mb_owner, (policy, strategy))
            self.assertEqual(libvirt_group, plan.libvirt_group)
            self.assertEqual(libvirt_group or owner == fit.MB_INSTANCE,
                             plan.own_group)
            self.assertEqual(10 if owner == fit.MB_SHARED else None,
                             plan.shared_value)


class TestPriority(base.TestCase):

    # A host with MBA that can only measure occupancy (CMT, no MBM), and
    # one that measures bandwidth but cannot throttle it (booted without
    # MBA, as the reference host with rdt=!mba).
    CMT_ONLY = info.HostCapabilities(
        caches={'L3': hosts._l3()}, membw={'MB': hosts._mb()},
        monitor=info.MonitorCapability(
            num_rmids=176, features=frozenset((info.LLC_OCCUPANCY,)),
            max_threshold_occupancy=None, domain_ids=(0, 1)))
    NO_MBA = info.HostCapabilities(caches={'L3': hosts._l3()},
                                   monitor=hosts._mon())

    def test_high_refused_without_mba_or_mbm(self):
        table = [
            (self.NO_MBA, 'needs memory bandwidth allocation (MBA)'),
            (hosts.MONITORING, 'needs memory bandwidth allocation (MBA)'),
            (hosts.L3_CAT, 'needs memory bandwidth allocation (MBA)'),
            (hosts.NONE, 'needs memory bandwidth allocation (MBA)'),
            (self.CMT_ONLY, 'needs memory bandwidth monitoring (MBM)'),
        ]
        for host, reason in table:
            e = self.assertRaises(exception.HostCannotServe, fit.fit,
                                  P(priority=es.PRIORITY_HIGH), host)
            self.assertIn('hw:rdt_priority=high %s' % reason, e.reason)

    def test_low_served_without_mba_or_mbm(self):
        # No high instance can run there, so none needs the low one
        # throttled: it runs as it is, monitored where the host can.
        table = [
            (self.NO_MBA, True),
            (hosts.MONITORING, True),
            (self.CMT_ONLY, True),
            (hosts.L3_CAT, False),
            (hosts.NONE, False),
        ]
        for host, monitored in table:
            for default in (True, False):
                plan = fit.fit(P(priority=es.PRIORITY_LOW), host,
                               monitoring=default)
                self.assertEqual(es.PRIORITY_LOW, plan.priority)
                self.assertEqual(monitored, plan.monitor, host)
                self.assertIsNone(plan.mem_bw)
                self.assertFalse(plan.own_group)
                self.assertFalse(plan.is_empty)

    def test_low_with_a_cap_still_needs_mba(self):
        e = self.assertRaises(exception.HostCannotServe, fit.fit,
                              P(priority=es.PRIORITY_LOW, mem_bw=30),
                              self.NO_MBA)
        self.assertIn('no memory bandwidth allocation (MBA)', e.reason)

    def test_low_asking_for_monitoring_needs_it(self):
        e = self.assertRaises(exception.HostCannotServe, fit.fit,
                              P(priority=es.PRIORITY_LOW, monitor=True),
                              hosts.L3_CAT)
        self.assertIn('hw:rdt_monitor=true needs', e.reason)

    def test_normal_is_served_anywhere(self):
        for host in (self.NO_MBA, self.CMT_ONLY, hosts.NONE):
            plan = fit.fit(P(priority=es.PRIORITY_NORMAL), host)
            self.assertEqual(es.PRIORITY_NORMAL, plan.priority)

    def test_classes_are_monitored_whatever_the_host_default(self):
        for priority in (es.PRIORITY_HIGH, es.PRIORITY_LOW):
            plan = fit.fit(P(priority=priority), hosts.REFERENCE,
                           monitoring=False)
            self.assertTrue(plan.monitor)
            self.assertEqual(priority, plan.priority)
            self.assertFalse(plan.is_empty)
            self.assertIsNone(plan.mb_owner)
            self.assertFalse(plan.own_group)

    def test_low_bandwidth_goes_to_the_agent_whatever_the_strategy(self):
        # (policy, host, strategy, owner): a low instance's percentage
        # joins the agent's shared group even on a per-instance host,
        # where a normal or high one gets libvirt's <memorytune>.
        low, high = es.PRIORITY_LOW, es.PRIORITY_HIGH
        table = [
            (P(mem_bw=10, priority=low), hosts.REFERENCE, PER,
             fit.MB_SHARED),
            (P(mem_bw=10, priority=low), hosts.REFERENCE, SHARED,
             fit.MB_SHARED),
            (P(mem_bw=10, priority=high), hosts.REFERENCE, PER,
             fit.MB_LIBVIRT),
            (P(mem_bw=10), hosts.REFERENCE, PER, fit.MB_LIBVIRT),
            (P(mem_bw_mbps=500, priority=low), hosts.MBPS, PER,
             fit.MB_INSTANCE),
            (P(mem_bw_mbps=500, priority=low), hosts.AMD, PER,
             fit.MB_INSTANCE),
        ]
        for policy, host, strategy, owner in table:
            plan = fit.fit(policy, host, strategy)
            self.assertEqual(owner, plan.mb_owner, (policy, strategy))
            self.assertEqual(owner == fit.MB_LIBVIRT, plan.libvirt_group,
                             policy)

    def test_static_cap_is_kept(self):
        # The cap is the ceiling of the controller's levels: the plan keeps
        # it, rounded as for any instance.
        plan = fit.fit(P(mem_bw=15, priority=es.PRIORITY_LOW),
                       hosts.REFERENCE, PER)
        self.assertEqual((info.UNIT_PERCENT, 20, 15),
                         (plan.mem_bw.unit, plan.mem_bw.value,
                          plan.mem_bw.requested))
        self.assertEqual(20, plan.shared_value)
