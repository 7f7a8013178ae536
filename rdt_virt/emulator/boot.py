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

"""What the kernel enables at boot: CPU quirks and the ``rdt=`` option.

The kernel does not use every feature CPUID reports. ``check_quirks()``
(``arch/x86/kernel/cpu/resctrl/core.c``) turns some off by CPU model:

* Skylake-X (family 6, model 0x55: Skylake-SP, Cascade Lake, Cooper
  Lake): stepping <= 4 loses ``cmt``, ``mbmtotal``, ``mbmlocal`` and
  ``l3cat``; later steppings, such as the Xeon Gold 6252 (stepping 7),
  lose ``l3cat``. Broadwell-X and Skylake-X also get a correction factor
  on MBM counts of high RMIDs, which the kernel applies itself (the
  emulator's counts are already true).

The ``rdt=`` boot option takes a comma-separated list of ``cmt``,
``mbmtotal``, ``mbmlocal``, ``l3cat``, ``l3cdp``, ``l2cat``, ``l2cdp``,
``mba``, ``smba``, ``bmec``; ``!name`` turns one off, ``name`` forces one
on. Forcing on wins over a quirk and over ``!``, but never enables what
CPUID lacks. :func:`apply` gives the profile the kernel presents for a
CPU and command line. The rules themselves are the library's
(:mod:`rdt_virt.resctrl.quirks`), which also explains them to operators.
"""

import dataclasses

from rdt_virt.resctrl import quirks as rules

OPTIONS = ('cmt', 'mbmtotal', 'mbmlocal', 'l3cat', 'l3cdp', 'l2cat',
           'l2cdp', 'mba', 'smba', 'bmec')


def parse_rdt_option(cmdline):
    """``(forced_on, forced_off)`` from a kernel command line."""
    on, off = rules.parse_rdt_option(cmdline)
    return on & set(OPTIONS), off & set(OPTIONS)


def quirks(cpu):
    """``(options turned off, reason)`` for a CPU (None: no quirk)."""
    return rules.model_quirks(cpu)


def enabled(option, cpu, cmdline):
    """The kernel's ``rdt_cpu_has()`` for a feature the CPU has."""
    on, off = parse_rdt_option(cmdline)
    off |= quirks(cpu)[0]
    return option in on or option not in off


_EVENTS = {'cmt': 'llc_occupancy', 'mbmtotal': 'mbm_total_bytes',
           'mbmlocal': 'mbm_local_bytes'}


def apply(profile):
    """The profile as the kernel presents it after boot.

    Uses ``profile.cpu`` and ``profile.cmdline``; a profile without a CPU
    identity only honours ``rdt=!...``.
    """
    cpu, cmdline = profile.cpu, profile.cmdline

    def has(option):
        return enabled(option, cpu, cmdline)

    changes = {}
    if profile.l3 and not has('l3cat'):
        changes['l3'] = None
    if profile.l3 and profile.l3.cdp_capable and not has('l3cdp'):
        changes['l3'] = changes.get('l3', dataclasses.replace(
            profile.l3, cdp_capable=False))
    if profile.l2 and not has('l2cat'):
        changes['l2'] = None
    if profile.mb and not has('mba'):
        changes['mb'] = None
    if profile.smba and not has('smba'):
        changes['smba'] = None
    if profile.mon:
        events = tuple(e for opt, e in _EVENTS.items()
                       if e in profile.mon.events and has(opt))
        events = tuple(e for e in profile.mon.events if e in events)
        if not events:
            changes['mon'] = None
        elif events != profile.mon.events:
            changes['mon'] = dataclasses.replace(profile.mon, events=events)
    if 'l3' in changes and changes['l3'] is None:
        changes['cdp'] = False
    return dataclasses.replace(profile, **changes) if changes else profile
