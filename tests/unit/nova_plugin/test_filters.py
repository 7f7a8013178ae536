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
import logging
from unittest import mock

import fixtures
from nova import exception

from nova_plugin.scheduler import filters
from nova_plugin.scheduler import state
from rdt_virt.policy import hoststats
from rdt_virt.resctrl import info
from tests import base
from tests.unit.nova_plugin import fakes


def placed(host_state):
    # What HostState.consume_from_request() counts for an instance.
    host_state.num_instances += 1


class TestRDTFilter(base.TestCase):

    def setUp(self):
        super().setUp()
        self.filt = filters.RDTFilter()
        self.useFixture(fakes.SchedulerState())

    def passes(self, stats, extra_specs, **kw):
        host = fakes.host_state(stats_=stats)
        return self.filt.host_passes(host, fakes.request_spec(extra_specs,
                                                              **kw))

    def test_plain_request_passes_everywhere_without_decoding(self):
        with mock.patch.object(hoststats, 'decode') as decode:
            self.assertTrue(self.passes(None, {}))
            self.assertTrue(self.passes(fakes.stats(),
                                        {'hw:cpu_policy': 'dedicated'}))
            # hw:rdt_monitor=false asks nothing of a host.
            self.assertTrue(self.passes(None, {'hw:rdt_monitor': 'false'}))
        decode.assert_not_called()

    def test_host_without_rdt_virt_fails_rdt_requests(self):
        self.assertFalse(self.passes(None, {'hw:mem_bw': '10'}))
        self.assertFalse(self.passes({'rdt_virt': 'garbage'},
                                     {'hw:mem_bw': '10'}))

    def test_capabilities(self):
        cases = [
            # (host, extra specs, passes)
            (fakes.REFERENCE, {'hw:mem_bw': '10'}, True),
            (fakes.REFERENCE, {'hw:cache_l3': '4096'}, True),
            (fakes.REFERENCE, {'hw:mem_bw_mbps': '1000'}, False),
            (fakes.REFERENCE, {'hw:cache_l3_code': '1024',
                               'hw:cache_l3_data': '1024'}, False),
            (fakes.CDP, {'hw:cache_l3': '4096'}, False),
            (fakes.CDP, {'hw:cache_l3_code': '1024',
                         'hw:cache_l3_data': '1024'}, True),
            (fakes.MBPS, {'hw:mem_bw': '10'}, False),
            (fakes.MBPS, {'hw:mem_bw_mbps': '1000'}, True),
            (fakes.AMD, {'hw:mem_bw_mbps': '1000'}, True),
            (fakes.AMD, {'hw:mem_bw': '10'}, False),
            (fakes.L3_CAT, {'hw:mem_bw': '10'}, False),
            (fakes.L3_CAT, {'hw:cache_l3': '1024'}, True),
            (fakes.L3_CAT, {'hw:rdt_monitor': 'true'}, False),
            (fakes.REFERENCE, {'hw:rdt_monitor': 'true'}, True),
            (fakes.NONE, {'hw:mem_bw': '10'}, False),
        ]
        for caps, specs, expected in cases:
            self.assertEqual(expected, self.passes(fakes.stats(caps), specs),
                             (caps, specs))

    def test_high_needs_mba_and_mbm_low_nothing(self):
        no_mbm = info.HostCapabilities(
            caches=fakes.REFERENCE.caches, membw=fakes.REFERENCE.membw,
            monitor=dataclasses.replace(
                fakes.REFERENCE.monitor,
                features=frozenset((info.LLC_OCCUPANCY,))))
        no_mba = info.HostCapabilities(caches=fakes.REFERENCE.caches,
                                       monitor=fakes.REFERENCE.monitor)
        cases = [
            (fakes.REFERENCE, True),
            (fakes.MBPS, True),
            (fakes.AMD, True),
            (no_mbm, False),
            (no_mba, False),
            (fakes.L3_CAT, False),
            (fakes.NONE, False),
        ]
        for caps, expected in cases:
            self.assertEqual(expected, self.passes(
                fakes.stats(caps), {'hw:rdt_priority': 'high'}), caps)
            # No high instance runs where MBA or MBM is missing: a low one
            # has nobody to be throttled for there.
            self.assertTrue(self.passes(
                fakes.stats(caps), {'hw:rdt_priority': 'low'}), caps)
        # A low cap needs MBA as any cap does.
        self.assertFalse(self.passes(fakes.stats(no_mba), {
            'hw:rdt_priority': 'low', 'hw:mem_bw': '30'}))
        # Hosts without rdt-virt's driver report nothing at all.
        self.assertFalse(self.passes(None, {'hw:rdt_priority': 'low'}))
        # normal asks nothing of a host, like a flavor without the key.
        with mock.patch.object(hoststats, 'decode') as decode:
            self.assertTrue(self.passes(None, {'hw:rdt_priority': 'normal'}))
        decode.assert_not_called()
        # Low with a dedicated cache is refused everywhere.
        self.assertFalse(self.passes(fakes.stats(), {
            'hw:rdt_priority': 'low', 'hw:cache_l3': '1024'}))
        self.assertTrue(self.passes(fakes.stats(), {
            'hw:rdt_priority': 'high', 'hw:cache_l3': '1024'}))

    def test_refusing_a_class_names_the_key(self):
        no_mba = fakes.host_state('no-mba', fakes.stats(fakes.L3_CAT))
        e = self.assertRaises(exception.NoValidHost, self.filt.filter_all,
                              [no_mba],
                              fakes.request_spec({'hw:rdt_priority': 'high'}))
        self.assertIn('no host can take hw:rdt_priority=high: 1 host: '
                      'hw:rdt_priority=high needs memory bandwidth '
                      'allocation (MBA)', str(e))
        self.assertEqual([no_mba], self.filt.filter_all(
            [no_mba], fakes.request_spec({'hw:rdt_priority': 'low'})))

    def test_closid_capacity(self):
        specs = {'hw:mem_bw': '10'}
        self.assertTrue(self.passes(fakes.stats(closids=1), specs))
        self.assertFalse(self.passes(fakes.stats(closids=0), specs))
        self.assertFalse(self.passes(fakes.stats(rmids=0), specs))

    def test_placement_counts_the_closid_of_flavors_that_request_it(self):
        # Placement allocated the CLOSID atomically; the filter's stats
        # may be older, so it does not count CLOSIDs a second time.
        specs = {'hw:mem_bw': '10', 'resources:CUSTOM_RDT_CLOSID': '1'}
        self.assertTrue(self.passes(fakes.stats(closids=0), specs))
        # It still checks what Placement does not count: the RMID of the
        # new group, contiguous ways, the features.
        self.assertFalse(self.passes(fakes.stats(closids=0, rmids=0), specs))
        specs = {'hw:cache_l3': '4096', 'resources:CUSTOM_RDT_CLOSID': '1'}
        self.assertTrue(self.passes(fakes.stats(closids=0,
                                                free_ways=0b0110), specs))
        self.assertFalse(self.passes(fakes.stats(closids=0,
                                                 free_ways=0b0101), specs))
        self.assertFalse(self.passes(fakes.stats(fakes.CDP, closids=0),
                                     specs))
        # The same policy without the key, on the same host, is refused:
        # the verdict cache keeps the two apart.
        host = fakes.host_state(stats_=fakes.stats(closids=0))
        for extra, expected in (({'resources:CUSTOM_RDT_CLOSID': '1'}, True),
                                ({}, False),
                                ({'resources:CUSTOM_RDT_CLOSID': '1'}, True)):
            spec = fakes.request_spec(dict({'hw:mem_bw': '10'}, **extra))
            self.assertEqual(expected, self.filt.host_passes(host, spec),
                             extra)

    def test_shared_strategy_needs_no_closid_for_an_existing_group(self):
        specs = {'hw:mem_bw': '10'}
        self.assertTrue(self.passes(
            fakes.stats(strategy='shared', closids=0, shared=[10]), specs))
        self.assertFalse(self.passes(
            fakes.stats(strategy='shared', closids=0, shared=[20]), specs))
        # hw:mem_bw=5 is rounded up to the host's minimum of 10.
        self.assertTrue(self.passes(
            fakes.stats(strategy='shared', closids=0, shared=[10]),
            {'hw:mem_bw': '5'}))

    def test_contiguous_ways(self):
        # 4 MiB is 2 ways of 3.25 MiB on the reference host.
        specs = {'hw:cache_l3': '4096'}
        self.assertTrue(self.passes(fakes.stats(free_ways=0b0110), specs))
        self.assertFalse(self.passes(fakes.stats(free_ways=0b0101), specs))
        self.assertFalse(self.passes(fakes.stats(free_ways=0), specs))

    def test_conflicting_extra_specs_fail_everywhere(self):
        self.assertFalse(self.passes(fakes.stats(), {
            'hw:mem_bw': '10', 'hw:mem_bw_mbps': '100'}))
        self.assertFalse(self.passes(fakes.stats(fakes.CDP), {
            'hw:cache_l3_code': '1024'}))

    def test_filter_all(self):
        good = fakes.host_state('good', fakes.stats())
        full = fakes.host_state('full', fakes.stats(closids=0))
        plain = fakes.host_state('plain', None)
        hosts = [good, full, plain]
        self.assertEqual([good], list(self.filt.filter_all(
            hosts, fakes.request_spec({'hw:mem_bw': '10'}))))
        self.assertEqual(hosts, list(self.filt.filter_all(
            hosts, fakes.request_spec({}))))
        # Rebuild keeps the host: no RDT check.
        self.assertEqual(hosts, list(self.filt.filter_all(
            hosts, fakes.request_spec({'hw:mem_bw': '10'}, rebuild=True))))
        e = self.assertRaises(
            exception.NoValidHost, self.filt.filter_all, hosts,
            fakes.request_spec({'hw:mem_bw': '10', 'hw:mem_bw_mbps': '1'}))
        self.assertIn('RDTFilter: ', str(e))
        self.assertIn('(hw:mem_bw=10, hw:mem_bw_mbps=1)', str(e))

    def test_refusing_every_host_names_rdt(self):
        # Nova's own reason for an empty list names nothing; the user sees
        # which RDT extra specs no host could serve, and no host name.
        full = fakes.host_state('full', fakes.stats(closids=0))
        spec = fakes.request_spec({'hw:mem_bw': '10', 'hw:cpu_policy': 'x'})
        e = self.assertRaises(exception.NoValidHost, self.filt.filter_all,
                              [full], spec)
        self.assertEqual(
            'No valid host was found. RDTFilter: no host can take '
            'hw:mem_bw=10: 1 host: no free CLOSID for a new resctrl '
            'control group.', str(e))
        # A multi-create request keeps Nova's reason: Nova gives back the
        # allocations of the instances it placed only when it raises.
        spec.num_instances = 3
        self.assertEqual([], self.filt.filter_all([full], spec))
        # No host given: nothing to refuse.
        self.assertEqual([], self.filt.filter_all([], fakes.request_spec(
            {'hw:mem_bw': '10'})))

    def test_refusals_are_counted_per_cause(self):
        # "Every host is full" and "no host has CDP" call for different
        # fixes: the reason counts the hosts refused per cause, and the
        # same line reaches the scheduler's log at INFO.
        log = self.useFixture(fixtures.FakeLogger(
            name='nova_plugin.scheduler.filters', level=logging.INFO))
        hosts = [fakes.host_state('ref%d' % i, fakes.stats())
                 for i in range(2)]
        hosts.append(fakes.host_state('plain', None))
        spec = fakes.request_spec({'hw:cache_l3_code': '1024',
                                   'hw:cache_l3_data': '1024'})
        e = self.assertRaises(exception.NoValidHost, self.filt.filter_all,
                              hosts, spec)
        why = ('no host can take hw:cache_l3_code=1024, '
               'hw:cache_l3_data=1024: 2 hosts: hw:cache_l3_code and '
               'hw:cache_l3_data need L3 CDP, which the host does not have '
               'enabled; 1 host: the host reports no RDT (no rdt-virt '
               'driver)')
        self.assertEqual('No valid host was found. RDTFilter: %s.' % why,
                         str(e))
        self.assertIn(why, log.output)

    def test_hosts_short_of_ways_count_as_one_cause(self):
        # The longest free run differs from host to host; the cause does
        # not, so the hosts are counted together.
        ways = [fakes.host_state('h%d' % i, fakes.stats(free_ways=mask))
                for i, mask in enumerate((0x1, 0x3))]
        full = fakes.host_state('full', fakes.stats(closids=0))
        e = self.assertRaises(
            exception.NoValidHost, self.filt.filter_all, ways + [full],
            fakes.request_spec({'hw:cache_l3': '12000'}))
        self.assertIn(': 2 hosts: L3 cache 0 has no 4 contiguous free ways; '
                      '1 host: no free CLOSID', str(e))

    def test_instances_placed_consume_capacity(self):
        a = fakes.host_state('a', fakes.stats(closids=1))
        b = fakes.host_state('b', fakes.stats(closids=1))
        spec = fakes.request_spec({'hw:mem_bw': '10'})
        self.assertEqual([a, b], self.filt.filter_all([a, b], spec))
        # Nova places the first instance of the request on a...
        placed(a)
        # ... and the second one sees a full.
        self.assertEqual([b], self.filt.filter_all([a, b], spec))
        placed(b)
        # So does the next request, until the hosts report again.
        self.assertRaises(exception.NoValidHost, self.filt.filter_all,
                          [a, b], fakes.request_spec({'hw:mem_bw': '20'}))
        # a reports: an instance went away meanwhile.
        a.stats = fakes.stats(closids=2)
        self.assertEqual([a], self.filt.filter_all(
            [a, b], fakes.request_spec({'hw:mem_bw': '20'})))

    FIRST = '11111111-1111-4111-8111-111111111111'

    def _report_while_landing(self, **report):
        """A boot passes host a, lands, and a reports ``report`` then.

        Returns a and the verdict of the next two requests.
        """
        a = fakes.host_state('a', fakes.stats(closids=2))
        spec = fakes.request_spec({'hw:mem_bw': '10'})
        spec.instance_uuid = self.FIRST
        self.assertEqual([a], self.filt.filter_all([a], spec))
        placed(a)
        # A new report, even where its content equals the last one's.
        a.stats = dict(fakes.stats(**report), **{hoststats.REPORT_KEY: '2'})
        second = self.filt.host_passes(a, fakes.request_spec(
            {'hw:mem_bw': '10'}))
        placed(a)
        third = self.filt.host_passes(a, fakes.request_spec(
            {'hw:mem_bw': '10'}))
        return second, third

    def test_periodic_report_without_the_landed_claim(self):
        # The periodic report took the claims before the instance's (its
        # capacity still shows 2 free) and counted the instance after it
        # landed: its CLOSID is taken from the new report too.
        self.assertEqual((True, False), self._report_while_landing(
            closids=2, claimed=frozenset()))

    def test_periodic_report_with_the_landed_claim(self):
        # The report counts the instance's claim: not taken twice.
        self.assertEqual((True, False), self._report_while_landing(
            closids=1, claimed=frozenset([self.FIRST])))

    def test_report_without_names_starts_afresh(self):
        # A report taken as an instance left, or an older rdt-virt's:
        # counted as holding every instance, as before.
        self.assertEqual((True, True), self._report_while_landing(
            closids=2))

    def test_plain_instances_consume_nothing_when_no_rdt_passed(self):
        a = fakes.host_state('a', fakes.stats(closids=1))
        plain = fakes.request_spec({})
        self.filt.filter_all([a], plain)
        placed(a)
        self.assertEqual([a], self.filt.filter_all(
            [a], fakes.request_spec({'hw:mem_bw': '10'})))

    def test_stats_update_is_seen(self):
        host = fakes.host_state(stats_=fakes.stats())
        spec = fakes.request_spec({'hw:mem_bw': '10'})
        self.assertTrue(self.filt.host_passes(host, spec))
        # The compute host reports that its last CLOSID is gone.
        host.stats = fakes.replace_capacity(host.stats, free_closids=0)
        spec = fakes.request_spec({'hw:mem_bw': '10'})
        self.assertFalse(self.filt.host_passes(host, spec))


class TestCaches(base.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fakes.SchedulerState())

    def test_request_parsed_once_per_spec(self):
        spec = fakes.request_spec({'hw:mem_bw': '10'})
        with mock.patch('rdt_virt.policy.extra_specs.from_extra_specs',
                        wraps=state.extra_specs.from_extra_specs) as parse:
            first = state.request_view(spec)
            self.assertIs(first, state.request_view(spec))
            self.assertEqual(1, parse.call_count)
            other = state.request_view(fakes.request_spec({'hw:mem_bw':
                                                           '10'}))
            self.assertEqual(2, parse.call_count)
        self.assertIsNot(first, other)
        # Same policy: the fit cache is shared.
        self.assertIs(first.fits, other.fits)
        # A resize puts another flavor into the same RequestSpec.
        spec.flavor = fakes.request_spec({'hw:cache_l3': '10'}).flavor
        self.assertEqual(10, state.request_view(spec).policy.cache_l3)

    def test_host_decoded_once_per_change(self):
        stats = fakes.stats()
        changed = fakes.replace_capacity(stats, free_closids=2)
        host = fakes.host_state(stats_=stats)
        with mock.patch.object(hoststats, 'decode',
                               wraps=hoststats.decode) as decode:
            view = state.host_view(host)
            self.assertIs(view, state.host_view(host))
            # HostState.update() assigns an equal, new dict per request.
            host.stats = dict(host.stats)
            self.assertIs(view, state.host_view(host))
            self.assertEqual(1, decode.call_count)
            host.stats = changed
            self.assertIsNot(view, state.host_view(host))
            self.assertEqual(2, decode.call_count)

    def test_fit_once_per_hardware(self):
        spec = fakes.request_spec({'hw:cache_l3': '4096'})
        request = state.request_view(spec)
        a = fakes.host_state('a', fakes.stats(closids=3))
        b = fakes.host_state('b', fakes.stats(closids=5))
        with mock.patch('rdt_virt.policy.fit.fit',
                        wraps=state.fit_mod.fit) as fit:
            va = state.host_view(a).verdict(request)
            vb = state.host_view(b).verdict(request)
            state.host_view(a).verdict(request)
        self.assertIs(va.plan, vb.plan)
        self.assertLessEqual(fit.call_count, 1)

    def test_headroom(self):
        caps = fakes.REFERENCE
        request = state.request_view(fakes.request_spec({'hw:mem_bw': '10'}))
        # 7 CLOSIDs free of 7: 6 left of 7 after the request.
        verdict = state.host_view(
            fakes.host_state('a', fakes.stats(caps))).verdict(request)
        self.assertAlmostEqual(6 / 7, verdict.headroom)
        verdict = state.host_view(fakes.host_state(
            'b', fakes.stats(caps, closids=1))).verdict(request)
        self.assertEqual(0.0, verdict.headroom)
        # Ways: 2 of 11 needed, 3 free: 1/11 left.
        request = state.request_view(fakes.request_spec({'hw:cache_l3':
                                                         '4096'}))
        verdict = state.host_view(fakes.host_state(
            'c', fakes.stats(caps, free_ways=0b111))).verdict(request)
        self.assertAlmostEqual(1 / 11, verdict.headroom)
