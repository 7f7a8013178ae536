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
from rdt_virt.resctrl import bitmask
from rdt_virt.resctrl import schemata
from tests import base
from tests.unit.resctrl import variants


class TestParseFormat(base.TestCase):

    def test_parse(self):
        for text, expected in [('7ff', 0x7ff), ('7FF\n', 0x7ff),
                               ('0x7ff', 0x7ff), ('003', 3), ('0', 0),
                               ('  fff0 ', 0xfff0)]:
            self.assertEqual(expected, bitmask.parse(text), text)

    def test_parse_bad(self):
        for text in ['', '  ', 'xyz', '-1', '7_ff', '0x', '7ff;', '+3']:
            self.assertRaises(exception.InvalidMask, bitmask.parse, text)

    def test_format(self):
        for mask, width, expected in [(0x7ff, None, '7ff'), (3, 11, '003'),
                                      (3, None, '3'), (0, 16, '0000'),
                                      (0xf, 16, '000f'), (0, None, '0')]:
            self.assertEqual(expected, bitmask.format(mask, width))


class TestContiguity(base.TestCase):

    TABLE = [
        # mask, contiguous, runs
        (0x0, False, []),
        (0x1, True, [(0, 1)]),
        (0x7ff, True, [(0, 11)]),
        (0x7f0, True, [(4, 7)]),
        (0x600, True, [(9, 2)]),
        (0x5, False, [(0, 1), (2, 1)]),
        (0xf0f, False, [(0, 4), (8, 4)]),
        (0x8001, False, [(0, 1), (15, 1)]),
    ]

    def test_table(self):
        for mask, contiguous, runs in self.TABLE:
            self.assertEqual(contiguous, bitmask.is_contiguous(mask),
                             hex(mask))
            self.assertEqual(runs, bitmask.runs(mask), hex(mask))
            self.assertEqual(sum(n for _s, n in runs), bitmask.popcount(mask))

    def test_run_mask_and_low_ways(self):
        self.assertEqual(0x7f0, bitmask.run_mask(4, 7))
        self.assertEqual(0x3, bitmask.low_ways(0x7ff, 2))
        self.assertEqual(0x30, bitmask.low_ways(0xff0, 2))
        # Never beyond the resource's mask.
        self.assertEqual(0x7ff, bitmask.low_ways(0x7ff, 20))


class TestValidate(base.TestCase):

    # mask, cbm_mask, min_cbm_bits, sparse, error fragment or None
    TABLE = [
        (0x7ff, 0x7ff, 1, False, None),
        (0x003, 0x7ff, 1, False, None),
        (0x600, 0x7ff, 1, False, None),     # the I/O-shared ways are legal
        (0x800, 0x7ff, 1, False, 'out of range'),
        (0xfff, 0x7ff, 1, False, 'out of range'),
        (0x0, 0x7ff, 1, False, 'out of range'),
        (0x70f, 0x7ff, 1, False, 'non-consecutive'),
        (0xf0f, 0xffff, 1, False, 'non-consecutive'),
        (0x001, 0xfffff, 2, False, 'at least 2 bits'),
        (0x003, 0xfffff, 2, False, None),
        # AMD: sparse masks, and an empty mask is allowed.
        (0x0, 0xffff, 0, True, None),
        (0xf0f0, 0xffff, 0, True, None),
        (0x10000, 0xffff, 0, True, 'out of range'),
        # Sparse with a minimum: the kernel checks the first run only.
        (0x5, 0xffff, 2, True, 'at least 2 bits'),
        (0x33, 0xffff, 2, True, None),
    ]

    def test_table(self):
        for mask, cbm, min_bits, sparse, error in self.TABLE:
            args = (mask, cbm, min_bits, sparse)
            if error is None:
                bitmask.validate(*args)
                continue
            exc = self.assertRaises(exception.InvalidMask, bitmask.validate,
                                    *args)
            self.assertIn(error, str(exc), args)

    def test_resource_validate_per_variant(self):
        # The same mask on every host that has L3: legal on Intel, where
        # 0x7f0 is the reserved default mask, and on AMD.
        for variant in variants.RDT_VARIANTS:
            caps = variants.CAPABILITIES[variant]
            for res in caps.caches.values():
                res.validate_mask(0x7f0)
                res.validate_mask(res.cbm_mask)
                self.assertRaises(exception.InvalidMask, res.validate_mask,
                                  res.cbm_mask << 1)


class TestFreeRuns(base.TestCase):

    # used, cbm_mask, free runs (largest first), largest
    TABLE = [
        (0x000, 0x7ff, [(0, 11)], 11),
        (0x7f0, 0x7ff, [(0, 4)], 4),
        (0x7f3, 0x7ff, [(2, 2)], 2),
        (0x7ff, 0x7ff, [], 0),
        (0x0f0, 0x7ff, [(0, 4), (8, 3)], 4),
        (0x031, 0x7ff, [(6, 5), (1, 3)], 5),
        (0xfff0, 0xffff, [(0, 4)], 4),
    ]

    def test_table(self):
        for used, cbm, runs, largest in self.TABLE:
            self.assertEqual(runs, bitmask.free_runs(used, cbm), hex(used))
            self.assertEqual(largest, bitmask.largest_free_run(used, cbm))

    def test_shareable_bits_are_excluded_by_callers(self):
        # Shareable ways may be used, never counted as dedicated: a caller
        # that wants dedicated ways ORs them into "used".
        shareable = 0x600
        self.assertEqual([(0, 9)], bitmask.free_runs(shareable, 0x7ff))
        self.assertEqual(0x600, bitmask.best_fit(0, 0x7ff, 11) & shareable)
        self.assertEqual(0, bitmask.best_fit(shareable, 0x7ff, 9) &
                         shareable)
        self.assertIsNone(bitmask.best_fit(shareable, 0x7ff, 10))

    def test_free_runs_per_cache_id(self):
        # Per cache id of the reference tree: the libvirt group holds ways
        # 0-1 of cache 0 only, the default group 4-10 of both.
        used = {}
        for group in [None] + variants.GROUPS['reference']:
            parts = ('schemata',) if group is None else (group, 'schemata')
            for dom, mask in schemata.parse(
                    variants.read('reference', *parts))['L3'].items():
                used[dom] = used.get(dom, 0) | mask
        self.assertEqual({0: [(2, 2)], 1: [(0, 4)]},
                         {dom: bitmask.free_runs(u, 0x7ff)
                          for dom, u in used.items()})


class TestBestFit(base.TestCase):

    # used, cbm_mask, nbits, expected mask or None
    TABLE = [
        (0x000, 0x7ff, 2, 0x003),
        (0x7f0, 0x7ff, 2, 0x003),
        (0x7f0, 0x7ff, 4, 0x00f),
        (0x7f0, 0x7ff, 5, None),
        # Smallest run that fits: the 2-way hole, not the 4-way one.
        (0x7f3, 0x7ff, 2, 0x00c),
        (0x4f0, 0x7ff, 2, 0x300),
        (0x403, 0x7ff, 2, 0x00c),
        (0x0, 0xffff, 16, 0xffff),
    ]

    def test_table(self):
        for used, cbm, nbits, expected in self.TABLE:
            self.assertEqual(expected, bitmask.best_fit(used, cbm, nbits),
                             (hex(used), nbits))

    def test_nbits_must_be_positive(self):
        self.assertRaises(ValueError, bitmask.best_fit, 0, 0x7ff, 0)
