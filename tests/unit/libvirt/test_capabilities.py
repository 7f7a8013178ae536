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

import testscenarios

from rdt_virt import exception
from rdt_virt.libvirt import capabilities
from rdt_virt.resctrl import info
from tests.unit.libvirt import xmlassert
from tests.unit.resctrl import variants

S0 = frozenset(range(0, 24)) | frozenset(range(48, 72))
S1 = frozenset(range(24, 48)) | frozenset(range(72, 96))


def _parse_fixture(variant, **kwargs):
    return capabilities.parse(
        xmlassert.fixture('capabilities-%s.xml' % variant), **kwargs)


def _as_libvirt_sees_it(caps):
    """The resctrl view less what libvirt's capabilities cannot carry."""
    if caps is None:
        return info.HostCapabilities()
    caches = {
        name: dataclasses.replace(res, shareable_bits=0, sparse_masks=False,
                                  min_cbm_bits=max(res.min_cbm_bits, 1))
        for name, res in caps.caches.items()}
    membw = {
        name: dataclasses.replace(res, thread_throttle_mode=None,
                                  max_value=0)
        for name, res in caps.membw.items() if name == 'MB'}
    return info.HostCapabilities(caches=caches, membw=membw,
                                 monitor=caps.monitor)


class TestAgreesWithResctrl(testscenarios.WithScenarios,
                            xmlassert.XMLTestCase):
    """libvirt's view of each variant against the resctrl fixture's."""

    scenarios = variants.scenarios()

    def setUp(self):
        super().setUp()
        self.resctrl = variants.CAPABILITIES[self.variant]
        unit = 'MBps' if self.variant == 'mba-mbps' else None
        self.host = _parse_fixture(self.variant, mb_unit=unit)
        self.caps = self.host.capabilities

    def test_equal_but_for_what_libvirt_does_not_say(self):
        self.assertEqual(_as_libvirt_sees_it(self.resctrl), self.caps)

    def test_closids_features_and_domains(self):
        expected = self.resctrl or info.HostCapabilities()
        self.assertEqual(expected.num_closids, self.caps.num_closids)
        self.assertEqual(expected.num_rmids, self.caps.num_rmids)
        self.assertEqual(expected.features - {'SMBA'}, self.caps.features)
        self.assertEqual(expected.cdp, self.caps.cdp)
        ids = {name: res.domain_ids for name, res in
               list(expected.caches.items()) + list(expected.membw.items())
               if name != 'SMBA'}
        self.assertEqual(ids, self.host.domain_ids())

    def test_way_counts_and_sizes(self):
        for name, res in self.caps.caches.items():
            theirs = self.resctrl.caches[name]
            self.assertEqual(theirs.cbm_width, res.cbm_width)
            self.assertEqual(theirs.way_sizes, res.way_sizes)
            for dom in res.domain_ids:
                self.assertEqual(theirs.cache_size(dom),
                                 self.host.bank_sizes[('L3', dom)])

    def test_bank_cpus(self):
        if self.variant == 'amd':
            expected = {('L3', 2 * i): frozenset(range(8 * i, 8 * i + 8)) |
                        frozenset(range(32 + 8 * i, 40 + 8 * i))
                        for i in range(4)}
        else:
            expected = {('L3', 0): S0, ('L3', 1): S1}
        self.assertEqual(expected, self.host.bank_cpus)
        if self.caps.mb:
            self.assertEqual({i: cpus for (_n, i), cpus in expected.items()},
                             self.host.node_cpus)
        else:
            self.assertEqual({}, self.host.node_cpus)


class TestParse(xmlassert.XMLTestCase):

    def test_mb_unit(self):
        for variant, mb_unit, expected in [
                ('reference', None, info.UNIT_PERCENT),
                # libvirt shows mba_MBps as percent; the caller knows better.
                ('mba-mbps', None, info.UNIT_PERCENT),
                ('mba-mbps', 'MBps', info.UNIT_MBPS),
                ('amd', None, info.UNIT_AMD)]:
            caps = _parse_fixture(variant, mb_unit=mb_unit).capabilities
            self.assertEqual(expected, caps.mb.unit, (variant, mb_unit))
        self.assertRaises(exception.InvalidCapabilities, _parse_fixture,
                          'reference', mb_unit='GBps')

    def test_min_and_other_levels(self):
        # An older Skylake layout: min present, L2 banks with and without
        # control, a CMT-only monitor, a host element on its own.
        text = """
        <host>
          <cache>
            <bank id='0' level='2' type='both' size='1' unit='MiB' cpus='0'>
              <control granularity='64' unit='KiB' type='both'
                       maxAllocs='8'/>
            </bank>
            <bank id='1' level='2' type='both' size='1' unit='MiB' cpus='1'>
              <control granularity='64' unit='KiB' type='both'
                       maxAllocs='8'/>
            </bank>
            <bank id='0' level='3' type='both' size='15' unit='MiB'
                  cpus='0-1'>
              <control granularity='768' min='1536' unit='KiB'
                       type='both' maxAllocs='16'/>
            </bank>
            <monitor level='3' reuseThreshold='270336' maxMonitors='176'>
              <feature name='llc_occupancy'/>
            </monitor>
          </cache>
        </host>"""
        host = capabilities.parse(text)
        l3 = host.capabilities.caches['L3']
        self.assertEqual((0xfffff, 2, 16, (0,), ((0, 768 * 1024),)),
                         (l3.cbm_mask, l3.min_cbm_bits, l3.num_closids,
                          l3.domain_ids, l3.way_sizes))
        l2 = host.capabilities.caches['L2']
        self.assertEqual((0xffff, 1, 8, (0, 1)), (
            l2.cbm_mask, l2.min_cbm_bits, l2.num_closids, l2.domain_ids))
        self.assertEqual(8, host.capabilities.num_closids)
        self.assertEqual(info.MonitorCapability(
            num_rmids=176, features=frozenset(['llc_occupancy']),
            max_threshold_occupancy=270336, domain_ids=(0,)),
            host.capabilities.monitor)
        self.assertEqual({('L2', 0): {0}, ('L2', 1): {1}, ('L3', 0): {0, 1}},
                         host.bank_cpus)
        self.assertEqual({'L2_CAT', 'L3_CAT', 'CMT'},
                         host.capabilities.features)

    def test_no_rdt(self):
        for text in ['<capabilities><host/></capabilities>',
                     '<capabilities><host><cache/></host></capabilities>',
                     xmlassert.fixture('capabilities-none.xml')]:
            caps = capabilities.parse(text).capabilities
            self.assertEqual(info.HostCapabilities(), caps)
            self.assertFalse(caps.rdt_enabled)

    BAD = [
        ('<capabilities>', 'not well-formed'),
        ('<domain/>', 'expected <capabilities> or <host>'),
        ('<capabilities/>', 'expected <capabilities> or <host>'),
        ("<host><cache><bank id='0' level='3' type='both' size='8' "
         "unit='MiB'><control granularity='9' unit='MiB' type='both' "
         "maxAllocs='16'/></bank></cache></host>", 'does not fit'),
        ("<host><cache><bank id='0' level='3' type='both' size='8' "
         "unit='MiB'><control granularity='1' unit='MiB' type='both' "
         "maxAllocs='16'/></bank><bank id='1' level='3' type='both' "
         "size='8' unit='MiB'><control granularity='1' unit='MiB' "
         "type='both' maxAllocs='8'/></bank></cache></host>", 'disagree'),
        ("<host><cache><bank id='0' level='3' type='both' size='8' "
         "unit='MiB'><control unit='MiB' type='both' maxAllocs='16'/>"
         "</bank></cache></host>", 'lacks attribute granularity'),
        ("<host><cache><bank id='0' level='3' type='unified' size='8' "
         "unit='MiB'/></cache></host>", 'unknown type'),
        ("<host><cache><bank id='x' level='3' type='both' size='8'/>"
         "</cache></host>", 'not a non-negative integer'),
        ("<host><memory_bandwidth><node id='0' cpus='0'><control "
         "granularity='10' min='10' maxAllocs='8'/></node><node id='1' "
         "cpus='1'><control granularity='10' min='20' maxAllocs='8'/>"
         "</node></memory_bandwidth></host>", 'disagree'),
        ("<host><memory_bandwidth><node id='0' cpus='0'><control "
         "granularity='10' maxAllocs='8'/></node></memory_bandwidth>"
         "</host>", 'lacks attribute min'),
    ]

    def test_bad(self):
        for text, reason in self.BAD:
            exc = self.assertRaises(exception.InvalidCapabilities,
                                    capabilities.parse, text)
            self.assertIn(reason, str(exc), text)

    def test_resource_name(self):
        for level, ctype, name in [(3, 'both', 'L3'), (3, 'code', 'L3CODE'),
                                   (2, 'data', 'L2DATA')]:
            self.assertEqual(name, capabilities.resource_name(level, ctype))
            self.assertEqual((level, ctype), info.CACHE_RESOURCES[name])
