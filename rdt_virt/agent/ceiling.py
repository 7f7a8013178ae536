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

"""The most memory bandwidth a host can have: the rates' sanity bound.

MBM counters can jump by petabytes when hardware resets them (AMD without
counter assignment), and the kernel shows the jump as traffic. A rate above
what the host's memory can move is such a jump, never traffic; the sampler
drops it (:mod:`rdt_virt.agent.sampler`).

The ceiling, in bytes per second for the whole host, is, in order:

1. ``[rdt_agent] memory_bandwidth_ceiling`` when set (GB/s);
2. the peak of the installed memory from SMBIOS (DMI type 17, "Memory
   Device": configured speed in MT/s x data width, summed over the
   populated devices), times :data:`MARGIN` for measurement jitter. Summing
   devices overestimates hosts with two DIMMs per channel, which is fine
   for a bound;
3. :data:`DOMAIN_FALLBACK` per L3 monitoring domain, above what any
   current socket has (12 channels of MRDIMM-8800 move about 845 GB/s).
"""

import glob
import os
import struct

GB = 10 ** 9
MARGIN = 1.5
DOMAIN_FALLBACK = 1000 * GB
_DMI_ENTRIES = '/sys/firmware/dmi/entries'


def _word(raw, offset):
    if len(raw) < offset + 2:
        return None
    return struct.unpack_from('<H', raw, offset)[0]


def _dword(raw, offset):
    if len(raw) < offset + 4:
        return None
    return struct.unpack_from('<I', raw, offset)[0]


def memory_device_peak(raw):
    """Peak bytes per second of one SMBIOS type 17 structure, or 0.

    0 for an empty slot or a device whose speed or width is unknown.
    """
    if len(raw) < 0x17 or raw[0] != 17:
        return 0
    length = raw[1]
    raw = raw[:length]
    size = _word(raw, 0x0C)
    width = _word(raw, 0x0A)
    if not size or size == 0xFFFF or not width or width == 0xFFFF:
        return 0
    speed = _word(raw, 0x20) or _word(raw, 0x15) or 0
    if speed == 0xFFFF:
        # SMBIOS 3.3: the real value is in the extended fields.
        speed = _dword(raw, 0x58) or _dword(raw, 0x54) or 0
        speed &= 0x7FFFFFFF
    return speed * 10 ** 6 * width // 8


def dmi_peak(entries=_DMI_ENTRIES):
    """Sum of :func:`memory_device_peak` over the host, or None.

    None when the entries cannot be read (no SMBIOS, or not root: the
    kernel makes them readable by root only).
    """
    total = 0
    found = False
    for path in sorted(glob.glob(os.path.join(entries, '17-*', 'raw'))):
        try:
            with open(path, 'rb') as f:
                raw = f.read()
        except OSError:
            continue
        found = True
        total += memory_device_peak(raw)
    return total if found and total else None


def host_ceiling(configured_gbps, mon_domains, entries=_DMI_ENTRIES):
    """The host's ceiling in bytes per second, and where it comes from.

    :param configured_gbps: ``[rdt_agent] memory_bandwidth_ceiling``
        (0: automatic).
    :param mon_domains: number of L3 monitoring domains.
    :returns: ``(bytes per second, 'configured'|'smbios'|'default')``.
    """
    if configured_gbps and configured_gbps > 0:
        return int(configured_gbps * GB), 'configured'
    peak = dmi_peak(entries)
    if peak:
        return int(peak * MARGIN), 'smbios'
    return DOMAIN_FALLBACK * max(int(mon_domains), 1), 'default'
