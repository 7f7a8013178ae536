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

"""Fuzz targets: every parser of text that comes from outside rdt-virt.

Each target takes the fuzzer's bytes, turns them into what the parser
reads (text decoded as the readers decode it; a few line-based encodings
for parsers that take several files or a mapping), calls the parser, and
lets through only the exception type that parser documents. Anything
else escapes and is a finding. No fuzzer is needed here: the unit tests
replay the corpora and crashers through the same targets, and
:mod:`tests.fuzz.run` drives them with atheris.
"""

import collections

from rdt_virt.agent import desired
from rdt_virt.agent import procfs
from rdt_virt.agent import state
from rdt_virt import exception
from rdt_virt.libvirt import capabilities
from rdt_virt.libvirt import domain
from rdt_virt.policy import extra_specs
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import info
from rdt_virt.resctrl import schemata

Target = collections.namedtuple('Target', ['name', 'func', 'allowed',
                                           'about', 'measured', 'max_len'])
Target.__new__.__defaults__ = (4096,)
Target.__doc__ = """A fuzz target: ``func(data)`` may raise only ``allowed``;
``measured`` are the parser's modules and functions whose statement
coverage :mod:`tests.fuzz.measure` reports; ``max_len`` bounds the inputs
(libvirt's XML documents are larger than resctrl's files)."""


def text(data):
    # The readers open these files as UTF-8 text; what is not UTF-8 there
    # fails in the read, before any parser, so it is out of scope here.
    return data.decode('utf-8', 'replace')


def _info(data):
    # One line per file: "<path under info/> <content>", plus "schemata
    # <line>", "size <line>", "mon <id>" and "opt <option>" lines for the
    # root group's files, the mon_data directories and the mount options.
    files, root, size, mon, opts = {}, [], [], [], []
    for line in text(data).split('\n'):
        key, _sep, value = line.partition(' ')
        if key == 'schemata':
            root.append(value)
        elif key == 'size':
            size.append(value)
        elif key == 'mon':
            if value.isascii() and value.isdigit() and len(value) < 6:
                mon.append(int(value))
        elif key == 'opt':
            opts.append(value)
        elif key:
            # Repeated paths are the lines of one file (mon_features).
            files[key] = files.get(key, '') + value + '\n'
    caps = info.parse(files, root_schemata='\n'.join(root),
                      root_size='\n'.join(size), mount_options=opts,
                      mon_domain_ids=mon)
    # Derived values must be computable for whatever parsed.
    caps.features
    caps.rdt_enabled


def _schemata(data):
    parsed = schemata.parse(text(data))
    # What parses must format and parse back to the same.
    if parsed:
        again = schemata.parse(schemata.format(parsed))
        assert again == parsed, (parsed, again)


def _size(data):
    schemata.parse(text(data), decimal=True)


def _mon_data(data):
    value = fs.parse_mon_value(text(data))
    # A counter is a byte count; anything else must come with a reason.
    assert (value.value is None) != (value.reason is None), value
    assert value.value is None or value.value >= 0, value


def _tasks(data):
    for tid in fs.parse_tasks(text(data)):
        assert isinstance(tid, int) and tid >= 0


def _cpus_list(data):
    cpus = fs.parse_cpu_list(text(data))
    assert all(0 <= c < fs.MAX_CPUS for c in cpus)
    assert fs.parse_cpu_list(fs.format_cpu_list(cpus)) == cpus


def _mountinfo(data):
    opts = fs.parse_mount_options(text(data), '/sys/fs/resctrl')
    assert isinstance(opts, frozenset)


def _capabilities(data):
    caps = capabilities.parse(text(data))
    caps.capabilities.features


def _domain(data):
    desired.parse(text(data))


def _extra_specs(data):
    # "key=value" per line: the flavor's extra specs as Nova hands them.
    specs = {}
    for line in text(data).split('\n'):
        key, _sep, value = line.partition('=')
        specs[key] = value
    extra_specs.from_extra_specs(specs)


def _state(data):
    doc = state.parse(text(data))
    for entry in doc.get('instances', {}).values():
        assert isinstance(entry, dict)


def _comm(data):
    vcpu = procfs.vcpu_of(text(data))
    assert vcpu is None or 0 <= vcpu < 100000


_SCHEMATA_FUNCS = (schemata.parse, schemata.parse_line,
                   schemata._parse_value, schemata.format,
                   schemata.format_line, schemata.format_value)

TARGETS = collections.OrderedDict((t.name, t) for t in (
    Target('info', _info,
           (exception.InvalidCapabilities, exception.InvalidSchemata),
           'resctrl info/ files with the root schemata and size', (info,)),
    Target('schemata', _schemata, (exception.InvalidSchemata,),
           'a group\'s schemata file', _SCHEMATA_FUNCS),
    Target('size', _size, (exception.InvalidSchemata,),
           'a group\'s size file', _SCHEMATA_FUNCS[:3]),
    Target('mon_data', _mon_data, (), 'a mon_data counter file',
           (fs.parse_mon_value,)),
    Target('tasks', _tasks, (ValueError,), 'a tasks file',
           (fs.parse_tasks,)),
    Target('cpus_list', _cpus_list, (ValueError,), 'a cpus_list file',
           (fs.parse_cpu_list, fs._cpu, fs.format_cpu_list)),
    Target('mountinfo', _mountinfo, (), '/proc/self/mountinfo',
           (fs.parse_mount_options, fs._unescape_mountinfo)),
    Target('capabilities', _capabilities,
           (exception.InvalidCapabilities,),
           'libvirt host capabilities XML', (capabilities,), 16384),
    Target('domain', _domain, (exception.InvalidXML,),
           'live domain XML with rdt-virt and Nova metadata',
           (desired, domain), 16384),
    Target('extra_specs', _extra_specs, (exception.InvalidExtraSpec,),
           'flavor extra specs', (extra_specs,)),
    Target('state', _state, (exception.InvalidStateFile,),
           'the agent\'s host state file',
           (state.parse, state._number, state._clean_numbers,
            state._no_constant)),
    Target('comm', _comm, (), '/proc/<pid>/task/<tid>/comm',
           (procfs.vcpu_of,)),
))


def run_one(target, data):
    """Run ``data`` through ``target``; documented refusals are fine."""
    try:
        target.func(data)
    except target.allowed:
        pass
