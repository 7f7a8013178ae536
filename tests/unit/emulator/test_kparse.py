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

import errno

from rdt_virt.emulator import kparse
from tests import base


class KstrtoxTest(base.TestCase):

    def check(self, func, cases):
        for args, expected in cases:
            if isinstance(expected, int) and expected < 0:
                e = self.assertRaises(kparse.ParseError, func, *args)
                self.assertEqual(-expected, e.errno, args)
            else:
                self.assertEqual(expected, func(*args), args)

    def test_kstrtoul(self):
        self.check(kparse.kstrtoul, [
            (('7ff', 16), 0x7ff), (('0x7FF', 16), 0x7ff),
            (('+7ff', 16), 0x7ff), (('7ff\n', 16), 0x7ff),
            (('10', 10), 10), (('010', 10), 10), (('010', 0), 8),
            (('0x10', 0), 16),
            ((' 1', 10), -errno.EINVAL), (('1 ', 10), -errno.EINVAL),
            (('', 10), -errno.EINVAL), (('0x', 16), -errno.EINVAL),
            (('1\n\n', 10), -errno.EINVAL), (('-1', 10), -errno.EINVAL),
            (('0x32', 10), -errno.EINVAL), (('1_0', 10), -errno.EINVAL),
            (('18446744073709551616', 10), -errno.ERANGE),
        ])

    def test_kstrtou32_and_int(self):
        self.check(kparse.kstrtou32, [
            (('4294967295', 10), 4294967295),
            (('4294967296', 10), -errno.ERANGE),
        ])
        self.assertEqual(-5, kparse.kstrtoint('-5', 0))
        self.check(kparse.kstrtoint, [
            (('010', 0), 8), (('0x1f', 0), 31),
            (('2147483648', 0), -errno.ERANGE), (('5x', 0), -errno.EINVAL),
        ])

    def test_first_run(self):
        self.assertEqual((0, 11), kparse.first_run(0x7ff, 11))
        self.assertEqual((4, 8), kparse.first_run(0xf0f0, 16))
        self.assertEqual((11, 11), kparse.first_run(0, 11))


class CpuSetTest(base.TestCase):

    def test_format_cpumask(self):
        for cpus, nbits, text in [
                ([0, 1], 2, '3'), ([], 2, '0'), ([1], 4, '2'),
                ([0], 40, '00,00000001'), ([32, 0], 64,
                                           '00000001,00000001'),
                ([4], 96, '00000000,00000000,00000010')]:
            self.assertEqual(text, kparse.format_cpumask(cpus, nbits))

    def test_format_cpulist(self):
        self.assertEqual('0-2,5,7-8',
                         kparse.format_cpulist([8, 7, 5, 2, 1, 0]))
        self.assertEqual('', kparse.format_cpulist([]))

    def test_parse_cpumask(self):
        for text, nbits, expected in [
                ('3', 2, {0, 1}), ('3\n', 2, {0, 1}), ('', 2, set()),
                ('0', 2, set()), ('00000002', 2, {1}),
                ('1,00000001', 40, {0, 32}), ('1,,1', 40, {0, 32}),
                ('4', 2, -errno.EOVERFLOW),
                ('000000001', 2, -errno.EOVERFLOW),
                ('1,1', 2, -errno.EOVERFLOW),
                ('x', 2, -errno.EINVAL), ('0x1', 2, -errno.EINVAL),
                ('-1', 2, -errno.EINVAL)]:
            if isinstance(expected, int):
                e = self.assertRaises(kparse.ParseError,
                                      kparse.parse_cpumask, text, nbits)
                self.assertEqual(-expected, e.errno, text)
            else:
                self.assertEqual(expected, kparse.parse_cpumask(text, nbits),
                                 text)

    def test_parse_cpulist(self):
        for text, expected in [
                ('0-1', {0, 1}), ('1\n', {1}), ('', set()), (' 0 , 3', {0, 3}),
                ('all', set(range(8))), ('N', {7}), ('0-7:1/4', {0, 4}),
                ('8', -errno.ERANGE), ('0-8', -errno.ERANGE),
                ('3-1', -errno.EINVAL), ('a', -errno.EINVAL),
                ('0-', -errno.EINVAL), ('0-7:2', -errno.EINVAL),
                ('+1', -errno.EINVAL)]:
            if isinstance(expected, int):
                e = self.assertRaises(kparse.ParseError,
                                      kparse.parse_cpulist, text, 8)
                self.assertEqual(-expected, e.errno, text)
            else:
                self.assertEqual(expected, kparse.parse_cpulist(text, 8),
                                 text)

    def test_round_trip(self):
        for cpus in ([], [0], [0, 1], [1, 3, 4, 5, 63]):
            self.assertEqual(set(cpus), kparse.parse_cpulist(
                kparse.format_cpulist(cpus), 64))
            self.assertEqual(set(cpus), kparse.parse_cpumask(
                kparse.format_cpumask(cpus, 64), 64))
