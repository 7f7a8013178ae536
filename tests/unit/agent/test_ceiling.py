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

"""The host's memory bandwidth ceiling from SMBIOS or configuration."""

import os
import struct

import fixtures

from rdt_virt.agent import ceiling
from tests import base


def type17(size_mb=32768, width=64, speed=3200, configured=2933,
           length=0x28):
    """An SMBIOS 'Memory Device' structure (only the fields read)."""
    raw = bytearray(length)
    raw[0], raw[1] = 17, length
    struct.pack_into('<H', raw, 0x0A, width)
    struct.pack_into('<H', raw, 0x0C, size_mb)
    struct.pack_into('<H', raw, 0x15, speed)
    if length >= 0x22:
        struct.pack_into('<H', raw, 0x20, configured)
    return bytes(raw) + b'\0\0'


class TestCeiling(base.TestCase):

    def setUp(self):
        super().setUp()
        self.dmi = self.useFixture(fixtures.TempDir()).path

    def add(self, n, raw):
        path = os.path.join(self.dmi, '17-%d' % n)
        os.mkdir(path)
        with open(os.path.join(path, 'raw'), 'wb') as f:
            f.write(raw)

    def test_device_peak(self):
        # Configured speed wins over the rated one: 2933 MT/s x 8 bytes.
        self.assertEqual(2933 * 10 ** 6 * 8,
                         ceiling.memory_device_peak(type17()))
        # An old structure without the configured speed.
        self.assertEqual(2400 * 10 ** 6 * 8, ceiling.memory_device_peak(
            type17(speed=2400, length=0x1B)))
        # Empty slot, unknown width, another structure type.
        self.assertEqual(0, ceiling.memory_device_peak(type17(size_mb=0)))
        self.assertEqual(0, ceiling.memory_device_peak(
            type17(width=0xFFFF)))
        self.assertEqual(0, ceiling.memory_device_peak(b'\x10' + b'\0' * 40))

    def test_host_sums_populated_devices(self):
        for n in range(12):
            self.add(n, type17(size_mb=0 if n % 2 else 32768))
        value, source = ceiling.host_ceiling(0, 2, self.dmi)
        self.assertEqual('smbios', source)
        self.assertEqual(int(6 * 2933 * 10 ** 6 * 8 * ceiling.MARGIN),
                         value)

    def test_configured_wins(self):
        self.add(0, type17())
        self.assertEqual((250 * 10 ** 9, 'configured'),
                         ceiling.host_ceiling(250, 2, self.dmi))

    def test_default_per_domain_without_smbios(self):
        self.assertEqual((4 * ceiling.DOMAIN_FALLBACK, 'default'),
                         ceiling.host_ceiling(0, 4, self.dmi))
        # Far below an AMD reset jump over any sampling interval.
        self.assertLess(4 * ceiling.DOMAIN_FALLBACK, 2 ** 44 * 64 / 60.0)
