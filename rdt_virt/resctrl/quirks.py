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

"""Why an RDT feature the CPU has is missing from resctrl.

``/proc/cpuinfo`` lists what CPUID reports (``cat_l3``, ``mba``,
``cqm_occup_llc``...), but resctrl only offers what the kernel enabled at
boot. The kernel turns features off:

* by CPU model (``check_quirks()`` in ``arch/x86/kernel/cpu/resctrl/
  core.c``): on Skylake-X family 6 model 0x55 (Skylake-SP, Cascade Lake,
  Cooper Lake) L3 CAT is off; steppings up to 4 also lose CMT and MBM;
* by the ``rdt=`` boot option: ``rdt=l3cat`` forces L3 CAT on (it wins
  over the quirk), ``rdt=!mba`` turns MBA off, and so on.

:func:`explain` turns that into sentences an operator can act on. Input
is text (``/proc/cpuinfo``, ``/proc/cmdline``) and the names of the
resources in ``info/``; :func:`read_host` reads the two files.
"""

import collections
import os

CpuInfo = collections.namedtuple('CpuInfo', 'vendor family model stepping '
                                            'flags')

#: ``rdt=`` option -> (cpuinfo flag, what resctrl shows when enabled)
FEATURES = collections.OrderedDict([
    ('l3cat', ('cat_l3', 'L3 cache allocation (info/L3)')),
    ('l3cdp', ('cdp_l3', 'L3 code/data prioritisation')),
    ('l2cat', ('cat_l2', 'L2 cache allocation (info/L2)')),
    ('mba', ('mba', 'memory bandwidth allocation (info/MB)')),
    ('cmt', ('cqm_occup_llc', 'cache occupancy monitoring '
                              '(llc_occupancy)')),
    ('mbmtotal', ('cqm_mbm_total', 'total memory bandwidth monitoring '
                                   '(mbm_total_bytes)')),
    ('mbmlocal', ('cqm_mbm_local', 'local memory bandwidth monitoring '
                                   '(mbm_local_bytes)')),
])

_SKYLAKE_X = 0x55

#: Intel family 6 models on which the kernel looks for Sub-NUMA
#: Clustering (``snc_cpu_ids`` in ``arch/x86/kernel/cpu/resctrl/
#: monitor.c``, 6.11+): Ice Lake-SP, Sapphire Rapids, Emerald Rapids,
#: Granite Rapids, Sierra Forest. Elsewhere (Skylake-SP and Cascade Lake
#: included) monitoring stays per L3 even with SNC on in the firmware.
SNC_MODELS = frozenset((0x6a, 0x8f, 0xcf, 0xad, 0xaf))


def snc_capable(vendor, family, model):
    """True where the kernel turns SNC into per-node monitoring."""
    return vendor == 'GenuineIntel' and family == 6 and model in SNC_MODELS


def parse_cpuinfo(text):
    """The first processor's identity and flags in ``/proc/cpuinfo``."""
    fields = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        key, _, value = line.partition(':')
        fields[key.strip()] = value.strip()

    def number(key):
        try:
            return int(fields.get(key, ''), 0)
        except ValueError:
            return None
    return CpuInfo(fields.get('vendor_id', ''), number('cpu family'),
                   number('model'), number('stepping'),
                   frozenset(fields.get('flags', '').split()))


def parse_rdt_option(cmdline):
    """``(forced_on, forced_off)`` option names of ``rdt=``."""
    on, off = set(), set()
    for word in (cmdline or '').split():
        key, eq, value = word.partition('=')
        if key != 'rdt' or not eq:
            continue
        for tok in value.split(','):
            if tok.startswith('!'):
                off.add(tok[1:])
            elif tok:
                on.add(tok)
    return on, off


def model_quirks(cpu):
    """``({option}, description)`` the kernel turns off for this CPU."""
    if cpu is None or cpu.vendor != 'GenuineIntel' or cpu.family != 6:
        return set(), None
    if cpu.model == _SKYLAKE_X and cpu.stepping is not None:
        if cpu.stepping <= 4:
            return ({'l3cat', 'cmt', 'mbmtotal', 'mbmlocal'},
                    'Skylake-SP (family 6 model 85 stepping %d)'
                    % cpu.stepping)
        return {'l3cat'}, ('Cascade Lake/Cooper Lake (family 6 model 85 '
                           'stepping %d)' % cpu.stepping)
    return set(), None


def disabled(cpu, cmdline):
    """``{option: reason}`` for features the CPU has but resctrl lacks."""
    on, off = parse_rdt_option(cmdline)
    quirked, model = model_quirks(cpu)
    out = collections.OrderedDict()
    for option, (flag, _what) in FEATURES.items():
        if flag not in cpu.flags or option in on:
            continue
        if option in quirked:
            out[option] = 'quirk'
        elif option in off:
            out[option] = 'cmdline'
    return out


def explain(cpu, cmdline):
    """Sentences saying what is off and how to turn it on."""
    _quirked, model = model_quirks(cpu)
    lines = []
    for option, reason in disabled(cpu, cmdline).items():
        what = FEATURES[option][1]
        if reason == 'quirk':
            lines.append(
                'The CPU has %s, but the kernel turns it off on %s (an '
                'erratum quirk); boot with rdt=%s to enable it.'
                % (what, model, option))
        else:
            lines.append('%s is turned off by rdt=!%s on the kernel command '
                         'line.' % (what[0].upper() + what[1:], option))
    return lines


def read_host(proc='/proc'):
    """``(CpuInfo, cmdline)`` of this host (empty ones if unreadable)."""
    def read(name):
        try:
            with open(os.path.join(proc, name)) as f:
                return f.read()
        except OSError:
            return ''
    return parse_cpuinfo(read('cpuinfo')), read('cmdline').strip()


# resctrl's names (``info/`` and mon_data) of what a model quirk turns off.
RESCTRL_NAMES = collections.OrderedDict([
    ('l3cat', 'L3_CAT'), ('cmt', 'CMT'), ('mbmtotal', 'MBM_TOTAL'),
    ('mbmlocal', 'MBM_LOCAL')])


def notes(features, cpuinfo, cmdline):
    """Why features a model quirk turned off are missing from resctrl.

    :param features: the resctrl feature names the host shows.
    :param cpuinfo: text of ``/proc/cpuinfo``.
    :param cmdline: text of ``/proc/cmdline``.
    :returns: one sentence per missing feature, with the boot option.
    """
    quirked, model = model_quirks(parse_cpuinfo(cpuinfo))
    forced, _off = parse_rdt_option(cmdline)
    return ['Linux turns %s off on %s; boot with rdt=%s to turn it on'
            % (name, model, option)
            for option, name in RESCTRL_NAMES.items()
            if option in quirked and option not in forced and
            name not in features]
