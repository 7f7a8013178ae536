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

"""Capture what a host's resctrl and CPU caches look like, to replay it.

``rdt-virt capabilities --capture DIR`` writes::

    DIR/host.json               vendor, family/model/stepping, flags,
                                kernel release, command line, resctrl
                                mount options
    DIR/resctrl/info/...        every readable file under info/
    DIR/resctrl/<file>          the default group's files (schemata,
                                size, cpus, cpus_list, mode, ...)
    DIR/resctrl/mon_data/...    the default group's counter layout
    DIR/cpu/online, possible
    DIR/cpu/cpuN/cache/indexM/  sysfs cacheinfo of every online CPU

``rdt-virt-emulator mount --from-tree DIR`` (and the sandbox) emulate the
host the directory describes. Nothing is written to the host; group
directories and task lists are not copied.
"""

import json
import os
import platform

from rdt_virt.resctrl import quirks

_ROOT_FILES = ('schemata', 'size', 'cpus', 'cpus_list', 'mode',
               'mbm_L3_assignments')
_CACHE_FILES = ('id', 'level', 'type', 'size', 'shared_cpu_list',
                'shared_cpu_map', 'ways_of_associativity',
                'coherency_line_size', 'number_of_sets',
                'physical_line_partition')


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _write(dest, rel, text):
    path = os.path.join(dest, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


def _copy_tree(src, dest, rel):
    """Copy every readable regular file under src/rel (recursively)."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(os.path.join(src, rel)):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            text = _read(path)
            if text is not None:
                _write(dest, os.path.relpath(path, src), text)
                count += 1
    return count


def mount_options(proc, resctrl_root):
    """Options of the resctrl mount at *resctrl_root* in /proc/mounts."""
    text = _read(os.path.join(proc, 'mounts')) or ''
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[1] == resctrl_root:
            return [o for o in fields[3].split(',')
                    if o in ('cdp', 'cdpl2', 'mba_MBps', 'debug')]
    return []


def capture(dest, resctrl_root='/sys/fs/resctrl',
            sysfs_cpu='/sys/devices/system/cpu', proc='/proc'):
    """Write the capture of this host into *dest*.

    :returns: the number of files written.
    """
    os.makedirs(dest, exist_ok=True)
    cpu, cmdline = quirks.read_host(proc)
    host = {
        'vendor': cpu.vendor, 'family': cpu.family, 'model': cpu.model,
        'stepping': cpu.stepping, 'flags': sorted(cpu.flags),
        'kernel': platform.release(), 'cmdline': cmdline,
        'mount_options': mount_options(proc, resctrl_root),
    }
    _write(dest, 'host.json', json.dumps(host, indent=1, sort_keys=True))
    count = 1
    res = os.path.join(dest, 'resctrl')
    count += _copy_tree(resctrl_root, res, 'info')
    for name in _ROOT_FILES:
        text = _read(os.path.join(resctrl_root, name))
        if text is not None:
            _write(res, name, text)
            count += 1
    count += _copy_tree(resctrl_root, res, 'mon_data')
    cpus = os.path.join(dest, 'cpu')
    for name in ('online', 'possible'):
        text = _read(os.path.join(sysfs_cpu, name))
        if text is not None:
            _write(cpus, name, text)
            count += 1
    for entry in sorted(os.listdir(sysfs_cpu)):
        cache = os.path.join(sysfs_cpu, entry, 'cache')
        if not (entry.startswith('cpu') and entry[3:].isdigit() and
                os.path.isdir(cache)):
            continue
        for index in sorted(os.listdir(cache)):
            if not index.startswith('index'):
                continue
            for name in _CACHE_FILES:
                text = _read(os.path.join(cache, index, name))
                if text is not None:
                    _write(cpus, os.path.join(entry, 'cache', index, name),
                           text)
                    count += 1
    return count
