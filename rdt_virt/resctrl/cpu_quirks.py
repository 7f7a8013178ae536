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

"""RDT features Linux turns off on some CPUs, and how to turn them on.

At boot the kernel's ``__check_quirks_intel()``
(``arch/x86/kernel/cpu/resctrl/core.c``) switches features off on Intel
family 6 model 85 (0x55), the Skylake-SP/X die that Cascade Lake and
Cooper Lake reuse:

* steppings 0-4 (Skylake-SP): L3 CAT, CMT and both MBM events;
* steppings above 4 (Cascade Lake 5-7, Cooper Lake 10-11, the reference
  host's Xeon Gold 6252 among them): L3 CAT.

The boot option ``rdt=`` forces features on again (``rdt=l3cat``, or
``rdt=l3cat,cmt,mbmtotal,mbmlocal``); a forced-on feature wins over the
quirk. Pure functions of ``/proc/cpuinfo`` and ``/proc/cmdline`` text.
"""

import collections

# rdt= option names -> the rdt-virt feature each stands for.
OPTION_FEATURES = collections.OrderedDict([
    ('l3cat', 'L3_CAT'), ('cmt', 'CMT'), ('mbmtotal', 'MBM_TOTAL'),
    ('mbmlocal', 'MBM_LOCAL')])

Quirk = collections.namedtuple('Quirk', 'feature option reason')


def cpu_identity(cpuinfo):
    """``(vendor, family, model, stepping)`` of the first CPU, or None."""
    fields = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _sep, value = line.partition(':')
        fields[key.strip()] = value.strip()
    try:
        return (fields['vendor_id'], int(fields['cpu family']),
                int(fields['model']), int(fields['stepping']))
    except (KeyError, ValueError):
        return None


def forced_on(cmdline):
    """Option names the ``rdt=`` boot option forces on."""
    found = set()
    for word in cmdline.split():
        if word.startswith('rdt='):
            for item in word[4:].split(','):
                if item and not item.startswith('!'):
                    found.add(item)
    return found


def disabled(cpuinfo, cmdline):
    """The :class:`Quirk` list of features this kernel turned off.

    Empty on CPUs without a quirk and for features ``rdt=`` forced on.
    """
    ident = cpu_identity(cpuinfo)
    if ident is None:
        return []
    vendor, family, model, stepping = ident
    if vendor != 'GenuineIntel' or family != 6 or model != 0x55:
        return []
    if stepping <= 4:
        options = ('l3cat', 'cmt', 'mbmtotal', 'mbmlocal')
        cpu = 'Skylake-SP (family 6 model 85 stepping %d)' % stepping
    else:
        options = ('l3cat',)
        cpu = ('Cascade Lake/Cooper Lake (family 6 model 85 stepping %d)'
               % stepping)
    on = forced_on(cmdline)
    return [Quirk(OPTION_FEATURES[o], o,
                  'Linux turns %s off on %s; boot with rdt=%s to turn it on'
                  % (OPTION_FEATURES[o], cpu, o))
            for o in options if o not in on]


def notes(features, cpuinfo, cmdline):
    """Explanations for features missing from ``features`` by a quirk."""
    return [q.reason for q in disabled(cpuinfo, cmdline)
            if q.feature not in features]
