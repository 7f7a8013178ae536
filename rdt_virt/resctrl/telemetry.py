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

"""Package telemetry values (Intel AET, ``mon_PERF_PKG_XX``). Pure.

``rdtgroup_mondata_show()`` in ``fs/resctrl/ctrlmondata.c`` prints an event
whose ``mon_evt.is_floating_point`` is set with ``print_event_value()``:
the integer part of the hardware's fixed-point value, a point, and its
fraction rounded to nearest with ``decplaces[binary_bits]`` digits (six for
the 18 fraction bits of ``core_energy`` and ``activity`` in
``arch/x86/kernel/cpu/resctrl/intel_aet.c``). The perf events print as
integers; every event may read ``Unavailable`` (no aggregator has data for
the RMID: ``intel_aet_read_event()`` returns -EINVAL) or ``Error``.

:func:`parse_event` keeps the printed decimal exactly, as a
:class:`fractions.Fraction`: differences of two readings are then exact,
and nothing is lost before the rate is computed. ``core_energy`` is in
joules of the CPU cores (not L3, memory or I/O) and ``activity`` in farads,
an estimate of the work done that does not depend on the frequency the
cores ran at (``Documentation/filesystems/resctrl.rst``). Both are
cumulative per RMID and nothing resets them when an RMID changes hands.
"""

import fractions
import re

from rdt_virt.resctrl import fs

CORE_ENERGY = 'core_energy'
ACTIVITY = 'activity'
#: Events printed in fixed point; the others are integers.
FIXED_POINT_EVENTS = (CORE_ENERGY, ACTIVITY)

# Unsigned decimal, optionally with a fraction: what %llu.%0*llu prints.
_DECIMAL = re.compile(r'^([0-9]{1,20})(?:\.([0-9]{1,9}))?$')


def pkg_dir(package):
    """``mon_PERF_PKG_XX`` of a package id."""
    return 'mon_PERF_PKG_%02d' % package


def parse_event(text):
    """Parse a ``mon_PERF_PKG_XX`` file into a :data:`~fs.MonValue`.

    :returns: the value as an exact Fraction (an int for integer events),
        or None with the kernel's word or the reason it is unparsable.
    """
    text = text.strip()
    if text in fs.SENTINELS:
        return fs.MonValue(None, text)
    match = _DECIMAL.match(text) if text.isascii() else None
    if not match:
        return fs.MonValue(None, 'unparsable %r' % text[:40])
    whole, frac = match.groups()
    if frac is None:
        return fs.MonValue(int(whole), None)
    return fs.MonValue(fractions.Fraction(int(whole + frac),
                                          10 ** len(frac)), None)
