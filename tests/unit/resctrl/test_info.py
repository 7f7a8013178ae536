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

import os

import testscenarios

from rdt_virt import exception
from rdt_virt.resctrl import info
from tests import base
from tests.unit.resctrl import variants


def _info_files(variant):
    """``{'L3/cbm_mask': '7ff', ...}`` straight from a fixture tree."""
    base_dir = os.path.join(variants.path(variant), 'info')
    files = {}
    for res in os.listdir(base_dir):
        res_dir = os.path.join(base_dir, res)
        if os.path.isdir(res_dir):
            for name in os.listdir(res_dir):
                with open(os.path.join(res_dir, name)) as f:
                    files[res + '/' + name] = f.read().strip()
    return files


def _parse(variant, mount_options=None):
    mon_data = os.path.join(variants.path(variant), 'mon_data')
    mon_ids = ([int(n[len('mon_L3_'):]) for n in os.listdir(mon_data)]
               if os.path.isdir(mon_data) else [])
    if mount_options is None:
        mount_options = variants.MOUNT_OPTIONS.get(variant, ())
    return info.parse(_info_files(variant),
                      root_schemata=variants.read(variant, 'schemata'),
                      root_size=variants.read(variant, 'size'),
                      mount_options=mount_options,
                      mon_domain_ids=mon_ids)


class TestFixtureCapabilities(testscenarios.WithScenarios, base.TestCase):

    scenarios = variants.scenarios(variants.RDT_VARIANTS)

    def test_parse(self):
        self.assertEqual(variants.CAPABILITIES[self.variant],
                         _parse(self.variant))

    def test_unit_without_mount_options(self):
        # Without mountinfo (a container, a copied tree) the MB unit still
        # follows from the values: MBps defaults exceed any percentage.
        caps = _parse(self.variant, mount_options=())
        expected = variants.CAPABILITIES[self.variant]
        self.assertEqual(expected.mb and expected.mb.unit,
                         caps.mb and caps.mb.unit)

    def test_way_sizes_and_cache_sizes(self):
        caps = _parse(self.variant)
        for res in caps.caches.values():
            for dom in res.domain_ids:
                total = (variants.AMD_L3 if self.variant == 'amd'
                         else variants.REF_L3)
                self.assertEqual(total // res.cbm_width, res.way_size(dom))
                self.assertEqual(total // res.cbm_width * res.cbm_width,
                                 res.cache_size(dom))


class TestHostCapabilities(base.TestCase):

    # variant, num_closids, num_rmids, cdp, features
    TABLE = [
        ('reference', 8, 192, False,
         {'L3_CAT', 'MBA', 'CMT', 'MBM_TOTAL', 'MBM_LOCAL'}),
        ('cdp', 8, 192, True,
         {'L3_CAT', 'L3_CDP', 'MBA', 'CMT', 'MBM_TOTAL', 'MBM_LOCAL'}),
        ('mba-mbps', 8, 192, False,
         {'L3_CAT', 'MBA', 'MBA_MBPS', 'CMT', 'MBM_TOTAL', 'MBM_LOCAL'}),
        ('amd', 16, 256, False,
         {'L3_CAT', 'MBA', 'SMBA', 'CMT', 'MBM_TOTAL', 'MBM_LOCAL'}),
        ('l3-cat', 16, 0, False, {'L3_CAT'}),
        ('monitoring', 0, 192, False, {'CMT', 'MBM_TOTAL', 'MBM_LOCAL'}),
    ]

    def test_table(self):
        for variant, closids, rmids, cdp, features in self.TABLE:
            caps = variants.CAPABILITIES[variant]
            self.assertEqual(closids, caps.num_closids, variant)
            self.assertEqual(rmids, caps.num_rmids, variant)
            self.assertEqual(cdp, caps.cdp, variant)
            self.assertEqual(features, caps.features, variant)
            self.assertTrue(caps.rdt_enabled)
            self.assertLessEqual(features, set(info.ALL_FEATURES))

    def test_empty(self):
        caps = info.HostCapabilities()
        self.assertEqual((0, 0, False, frozenset(), False, None),
                         (caps.num_closids, caps.num_rmids, caps.cdp,
                          caps.features, caps.rdt_enabled, caps.mb))

    def test_cache_lookup(self):
        cdp = variants.CAPABILITIES['cdp']
        self.assertEqual('L3CODE', cdp.cache(3, 'code').name)
        self.assertEqual('L3DATA', cdp.cache(3, 'data').name)
        self.assertIsNone(cdp.cache(3))
        self.assertEqual('L3', variants.CAPABILITIES['reference'].cache(3)
                         .name)
        self.assertIsNone(variants.CAPABILITIES['reference'].cache(2))

    def test_max_bandwidth(self):
        for variant, expected in [('reference', 100),
                                  ('mba-mbps', 2 ** 32 - 1),
                                  ('amd', 2048)]:
            self.assertEqual(expected,
                             variants.CAPABILITIES[variant].mb.max_bandwidth)


class TestParse(base.TestCase):

    def test_amd_unlimited_value_from_the_hardware(self):
        # 1 << bw_len from CPUID: the root group holds it from the mount.
        amd = {'MB/min_bandwidth': '0', 'MB/num_closids': '16',
               'MB/bandwidth_gran': '1'}
        for root, expected in (('MB:0=4096;1=4096', 4096),
                               ('MB:0=2048;1=2048', 2048),
                               ('MB:0=1000;1=4096', 4096),
                               ('MB:0=1500;1=1500', 2048)):
            caps = info.parse(amd, root_schemata=root)
            self.assertEqual(expected, caps.mb.max_bandwidth, root)

    INFO = {'L3/cbm_mask': '7ff', 'L3/min_cbm_bits': '1',
            'L3/num_closids': '16', 'L3/shareable_bits': '0',
            'MB/min_bandwidth': '10', 'MB/bandwidth_gran': '10',
            'MB/num_closids': '8', 'MB/delay_linear': '1'}
    ROOT = 'L3:0=7ff;1=7ff\nMB:0=100;1=100\n'

    # MB min_bandwidth, root MB value, mount options, expected unit
    UNITS = [
        ('10', '100', (), info.UNIT_PERCENT),
        ('10', '100', ('rw', 'mba_MBps'), info.UNIT_MBPS),
        ('10', '4294967295', (), info.UNIT_MBPS),
        ('10', '50', ('mba_MBps',), info.UNIT_MBPS),
        ('0', '2048', (), info.UNIT_AMD),
    ]

    def test_mb_unit_detection(self):
        for min_bw, root_value, options, unit in self.UNITS:
            files = dict(self.INFO, **{'MB/min_bandwidth': min_bw})
            if min_bw == '0':
                # AMD: no delay, no throttle mode file.
                files['MB/delay_linear'] = '0'
            root = 'MB:0=%s;1=%s\n' % (root_value, root_value)
            caps = info.parse(files, 'L3:0=7ff;1=7ff\n' + root,
                              mount_options=options)
            self.assertEqual(unit, caps.mb.unit, (min_bw, root, options))

    def test_num_closids_is_the_minimum(self):
        for l3, mb, expected in [('16', '8', 8), ('4', '8', 4),
                                 ('16', '16', 16)]:
            files = dict(self.INFO, **{'L3/num_closids': l3,
                                       'MB/num_closids': mb})
            self.assertEqual(expected,
                             info.parse(files, self.ROOT).num_closids)

    def test_kernels_before_6_16_use_at_most_32_closids(self):
        # closid_init() started from 32 until the free map became a bitmap.
        files = dict(self.INFO, **{'L3/num_closids': '64',
                                   'MB/num_closids': '64'})
        for release, expected in [('6.1.0-18-amd64', 32),
                                  ('5.14.0-427.el9.x86_64', 32),
                                  ('6.15.9', 32), ('6.16.0', 64),
                                  ('7.0.1-arch1', 64), (None, 64),
                                  ('garbage', 64)]:
            caps = info.parse(files, self.ROOT, kernel_release=release)
            self.assertEqual((expected, expected),
                             (caps.num_closids, caps.kernel_closids),
                             release)
            # What the info files say is kept as it is.
            self.assertEqual(64, caps.caches['L3'].num_closids)
        # Fewer than 32: the hardware's count, on every release.
        caps = info.parse(self.INFO, self.ROOT, kernel_release='5.15.0')
        self.assertEqual(8, caps.num_closids)

    def test_enabled_io_alloc_takes_a_closid(self):
        amd = {'L3/cbm_mask': 'ffff', 'L3/num_closids': '16',
               'L3/io_alloc': 'disabled', 'MB/min_bandwidth': '0',
               'MB/num_closids': '16', 'MB/bandwidth_gran': '1'}
        root = 'L3:0=ffff;1=ffff\nMB:0=2048;1=2048\n'
        self.assertEqual((16, 16), (
            info.parse(amd, root).num_closids,
            info.parse(amd, root).kernel_closids))
        for text in ('enabled', 'enabled\n'):
            caps = info.parse(dict(amd, **{'L3/io_alloc': text}), root)
            self.assertTrue(caps.io_alloc)
            self.assertEqual((15, 16),
                             (caps.num_closids, caps.kernel_closids))
        caps = info.parse(dict(amd, **{'L3/io_alloc': 'not supported'}),
                          root)
        self.assertEqual(16, caps.num_closids)

    def test_defaults_for_optional_files(self):
        files = {'L3/cbm_mask': 'fffff', 'L3/num_closids': '4'}
        res = info.parse(files, 'L3:0=fffff\n').caches['L3']
        self.assertEqual((1, 0, False, ()),
                         (res.min_cbm_bits, res.shareable_bits,
                          res.sparse_masks, res.way_sizes))
        self.assertEqual(20, res.cbm_width)
        self.assertIsNone(res.way_size(0))
        self.assertIsNone(res.cache_size(0))

    def test_l2(self):
        files = {'L2/cbm_mask': 'ff', 'L2/num_closids': '8',
                 'L2CODE/cbm_mask': 'ff', 'L2CODE/num_closids': '4'}
        caps = info.parse(files, 'L2:0=ff;1=ff\nL2CODE:0=ff;1=ff\n',
                          root_size='L2:0=1048576;1=1048576\n')
        self.assertEqual((2, 'both', 131072), (
            caps.caches['L2'].level, caps.caches['L2'].type,
            caps.caches['L2'].way_size(1)))
        self.assertEqual({'L2_CAT', 'L2_CDP'}, caps.features)
        self.assertFalse(caps.cdp)

    def test_way_size_from_a_partial_default_mask(self):
        # 7 of 11 ways in the default group still give the per-way size.
        caps = info.parse(self.INFO, 'L3:0=7f0;1=7ff\n' + 'MB:0=100;1=100',
                          root_size='L3:0=23855104;1=37486592\n')
        self.assertEqual(((0, 3407872), (1, 3407872)),
                         caps.caches['L3'].way_sizes)

    def test_monitor_only(self):
        files = {'L3_MON/num_rmids': '176', 'L3_MON/mon_features':
                 'llc_occupancy\nmbm_total_bytes'}
        caps = info.parse(files, '', mon_domain_ids=[1, 0])
        self.assertEqual(info.MonitorCapability(
            num_rmids=176, features=frozenset(['llc_occupancy',
                                               'mbm_total_bytes']),
            max_threshold_occupancy=None, domain_ids=(0, 1)), caps.monitor)
        self.assertEqual({'CMT', 'MBM_TOTAL'}, caps.features)

    def test_bmec_config_files_are_not_events(self):
        files = {'L3_MON/num_rmids': '256', 'L3_MON/mon_features':
                 'llc_occupancy\nmbm_total_bytes\nmbm_total_bytes_config\n'
                 'mbm_local_bytes\nmbm_local_bytes_config\n'}
        caps = info.parse(files, '', mon_domain_ids=[0])
        self.assertEqual({'llc_occupancy', 'mbm_total_bytes',
                          'mbm_local_bytes'}, caps.monitor.features)
        self.assertEqual(('mbm_local_bytes', 'mbm_total_bytes'),
                         caps.monitor.mbm_events)

    def test_nothing(self):
        self.assertEqual(info.HostCapabilities(), info.parse({}))

    # files changed from INFO, root schemata, error fragment
    BAD = [
        ({'L3/num_closids': None}, ROOT, 'info/L3/num_closids'),
        ({'L3/cbm_mask': 'xyz'}, ROOT, 'not hexadecimal'),
        ({'MB/num_closids': 'eight'}, ROOT, 'not a number'),
        ({'MB/min_bandwidth': None}, ROOT, 'info/MB/min_bandwidth'),
        ({}, 'L3:0=7ff\n', 'no line for resource MB'),
        ({}, 'MB:0=100\n', 'no line for resource L3'),
        ({'L3_MON/num_rmids': 'many'}, ROOT, 'not a number'),
    ]

    def test_bad(self):
        for changes, root, reason in self.BAD:
            files = dict(self.INFO)
            for key, value in changes.items():
                if value is None:
                    files.pop(key)
                else:
                    files[key] = value
            exc = self.assertRaises(exception.InvalidCapabilities,
                                    info.parse, files, root)
            self.assertIn(reason, str(exc), changes)


# Intel Application Energy Telemetry (7.0): intel_aet.c enables the
# "energy" and "perf" event groups of Clearwater Forest with 576 RMIDs
# each; the L3 count comes from CPUID and is larger.
AET_INFO = {
    'L3/cbm_mask': 'fff', 'L3/min_cbm_bits': '1', 'L3/num_closids': '16',
    'L3/shareable_bits': '0',
    'MB/min_bandwidth': '10', 'MB/bandwidth_gran': '10',
    'MB/num_closids': '16', 'MB/delay_linear': '1',
    'MB/thread_throttle_mode': 'per-thread',
    'L3_MON/num_rmids': '1024',
    'L3_MON/mon_features': 'llc_occupancy\nmbm_total_bytes\nmbm_local_bytes',
    'L3_MON/max_threshold_occupancy': '98304',
    'PERF_PKG_MON/num_rmids': '576',
    'PERF_PKG_MON/mon_features': (
        'core_energy\nactivity\nstalls_llc_hit\nc1_res\n'
        'unhalted_core_cycles\nstalls_llc_miss\nc6_res\n'
        'unhalted_ref_cycles\nuops_retired'),
}
AET_ROOT = 'L3:0=fff;1=fff\nMB:0=100;1=100\n'

# Arm MPAM through mpam_resctrl.c (7.1): 64 PARTIDs, 4 PMGs, an MB control
# with 8 fraction bits (min_bandwidth 0, granularity 1), only CSU counters.
MPAM_INFO = {
    'L3/cbm_mask': 'ffff', 'L3/min_cbm_bits': '1', 'L3/num_closids': '64',
    'L3/shareable_bits': 'ffff', 'L3/sparse_masks': '1',
    'MB/min_bandwidth': '0', 'MB/bandwidth_gran': '1',
    'MB/num_closids': '64', 'MB/delay_linear': '1',
    'L3_MON/num_rmids': '256', 'L3_MON/mon_features': 'llc_occupancy',
    'L3_MON/max_threshold_occupancy': '131072',
}
MPAM_ROOT = 'L3:1=ffff\nMB:1=100\n'


class TestNewHardware(base.TestCase):

    def test_aet_rmids_are_the_smallest_pool(self):
        caps = info.parse(AET_INFO, AET_ROOT, pkg_domain_ids=(0, 1))
        self.assertEqual(1024, caps.monitor.num_rmids)
        self.assertEqual(576, caps.package_monitor.num_rmids)
        self.assertEqual(576, caps.num_rmids)
        self.assertIn('PERF_PKG_MON has 576 RMIDs', caps.rmid_limit)
        self.assertEqual((0, 1), caps.package_monitor.domain_ids)
        self.assertEqual({info.ENERGY, info.ACTIVITY},
                         {info.ENERGY, info.ACTIVITY} & caps.features)
        self.assertEqual(info.ARCH_X86, caps.arch)
        self.assertEqual(0, caps.rmids_per_closid)
        self.assertIsNone(caps.mon_groups_per_closid)

    def test_mpam_mb_is_a_percentage(self):
        # min_bandwidth 0 is not AMD here: delay_linear 1, no
        # thread_throttle_mode, root at 100.
        caps = info.parse(MPAM_INFO, MPAM_ROOT)
        self.assertEqual(info.UNIT_PERCENT, caps.mb.unit)
        self.assertEqual(100, caps.mb.max_bandwidth)
        self.assertEqual(info.ARCH_MPAM, caps.arch)

    def test_mpam_rmids_are_per_closid_pools(self):
        caps = info.parse(MPAM_INFO, MPAM_ROOT)
        self.assertEqual(256, caps.num_rmids)
        self.assertEqual(4, caps.rmids_per_closid)
        self.assertEqual(3, caps.mon_groups_per_closid)
        self.assertIn('4 PMGs per CLOSID', caps.rmid_limit)

    def test_mpam_monitor_only_host(self):
        # No MB: the L3 says all bits shareable with sparse masks.
        files = {k: v for k, v in MPAM_INFO.items()
                 if not k.startswith('MB/')}
        caps = info.parse(files, 'L3:1=ffff\n')
        self.assertEqual(info.ARCH_MPAM, caps.arch)
        self.assertEqual(4, caps.rmids_per_closid)

    def test_mb_unit_from_every_file(self):
        base_mb = {'MB/num_closids': '8', 'MB/bandwidth_gran': '1'}
        # min, delay_linear, throttle mode, root, expected unit, arch
        table = [
            ('0', '0', None, '2048', info.UNIT_AMD, info.ARCH_X86),
            ('0', '0', None, '100', info.UNIT_AMD, info.ARCH_X86),
            ('0', '1', None, '100', info.UNIT_PERCENT, info.ARCH_MPAM),
            ('0', '1', None, '50', info.UNIT_PERCENT, info.ARCH_MPAM),
            ('2', '1', None, '100', info.UNIT_PERCENT, info.ARCH_MPAM),
            ('10', '1', 'max', '100', info.UNIT_PERCENT, info.ARCH_X86),
            ('10', '0', 'per-thread', '100', info.UNIT_PERCENT,
             info.ARCH_X86),
            ('10', '1', 'max', '4294967295', info.UNIT_MBPS, info.ARCH_X86),
        ]
        for min_bw, linear, mode, root, unit, arch in table:
            files = dict(base_mb, **{'MB/min_bandwidth': min_bw,
                                     'MB/delay_linear': linear})
            if mode:
                files['MB/thread_throttle_mode'] = mode
            caps = info.parse(files, 'MB:0=%s\n' % root)
            self.assertEqual((unit, arch), (caps.mb.unit, caps.arch),
                             (min_bw, linear, mode, root))

    def test_old_intel_kernel_without_throttle_mode_file(self):
        # Before 5.10 Intel's MB had no thread_throttle_mode either.
        files = {'MB/min_bandwidth': '10', 'MB/bandwidth_gran': '10',
                 'MB/num_closids': '8', 'MB/delay_linear': '1'}
        caps = info.parse(files, 'MB:0=100\n', kernel_release='5.4.0-1')
        self.assertEqual(info.ARCH_X86, caps.arch)
