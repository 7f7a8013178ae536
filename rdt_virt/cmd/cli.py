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

"""``rdt-virt``: look at a compute host's RDT.

::

    rdt-virt [--config-file F] [--resctrl-root P] [--state-file F] COMMAND

    capabilities     what the host offers (features, CLOSIDs, RMIDs, ...)
    groups           every resctrl group: kind, owner, tasks, schemata
    top              per-instance LLC occupancy and memory bandwidth, live,
                     in the spirit of ``pqos -r`` (``--once`` for one table;
                     exit status 3 when the agent stopped publishing)
    flavor-audit     flavors whose RDT extra specs lack or contradict their
                     Placement keys, with the ``openstack flavor`` commands
                     that fix them (``[--os-cloud NAME]``)

``capabilities`` and ``groups`` read resctrl directly (no root needed to
read); ``top`` reads the state file rdt-virt-agent publishes;
``flavor-audit`` asks the compute API (:mod:`rdt_virt.cmd.flavor_audit`).
"""

import argparse
import json
import os
import sys
import time
import unicodedata

from rdt_virt.agent import desired
from rdt_virt.agent import reconcile
from rdt_virt.agent import state as state_mod
from rdt_virt.cmd import flavor_audit
from rdt_virt.cmd import output
from rdt_virt import conf as rdt_conf
from rdt_virt import exception
from rdt_virt.resctrl import capture
from rdt_virt.resctrl import fs
from rdt_virt.resctrl import quirks
from rdt_virt.resctrl import schemata as schemata_mod

CONF = rdt_conf.CONF
# Instance names longer than this are cut in tables.
NAME_WIDTH = 40


def _cell(value):
    """A value as one printable table cell.

    Domain names come from whoever defined the domain: control characters
    (a newline, a terminal escape) are shown escaped.
    """
    return ''.join(c.encode('unicode_escape').decode('ascii')
                   if unicodedata.category(c).startswith('C') else c
                   for c in str(value))


def _short(text, width=NAME_WIDTH):
    return text if len(text) <= width else text[:width - 1] + '~'


def _table(headers, rows):
    rows = [[_cell(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    fmt = '  '.join('%%-%ds' % w for w in widths)
    lines = [fmt % tuple(headers)]
    lines += [fmt % tuple(row) for row in rows]
    return '\n'.join(line.rstrip() for line in lines)


def owner(name, prefix):
    """Who owns a group name: default, rdt-virt, libvirt or other."""
    if name is None:
        return 'default'
    if name.startswith(prefix):
        return 'rdt-virt'
    if reconcile.is_libvirt_group(name):
        return 'libvirt'
    return 'other'


# capabilities ----------------------------------------------------------------

def _read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ''


def capabilities_doc(rc, proc='/proc'):
    caps = rc.capabilities()
    release = rc.kernel_release()
    doc = {'root': rc.root, 'features': sorted(caps.features),
           'num_closids': caps.num_closids, 'num_rmids': caps.num_rmids,
           'kernel_release': release, 'closid_limit': caps.closid_limit,
           'io_alloc': caps.io_alloc,
           'mount_options': sorted(rc.mount_options()), 'caches': {},
           'membw': {}}
    for res in caps.caches.values():
        doc['caches'][res.name] = {
            'cbm_mask': '%x' % res.cbm_mask, 'ways': res.cbm_width,
            'min_cbm_bits': res.min_cbm_bits,
            'num_closids': res.num_closids,
            'domains': {str(d): res.cache_size(d)
                        for d in res.domain_ids}}
    for res in caps.membw.values():
        doc['membw'][res.name] = {
            'unit': res.unit, 'min_bandwidth': res.min_bandwidth,
            'bandwidth_gran': res.bandwidth_gran,
            'num_closids': res.num_closids,
            'domains': list(res.domain_ids)}
    if caps.monitor:
        doc['monitor'] = {'num_rmids': caps.monitor.num_rmids,
                          'events': sorted(caps.monitor.features),
                          'domains': list(caps.monitor.domain_ids)}
    if caps.package_monitor:
        pkg = caps.package_monitor
        doc['package_monitor'] = {'num_rmids': pkg.num_rmids,
                                  'events': sorted(pkg.features),
                                  'packages': list(pkg.domain_ids)}
    doc['arch'] = caps.arch
    if caps.rmids_per_closid:
        doc['rmids_per_closid'] = caps.rmids_per_closid
    # Features the kernel turned off on this CPU, and how to get them.
    doc['notes'] = quirks.notes(
        caps.features, _read_text(os.path.join(proc, 'cpuinfo')),
        _read_text(os.path.join(proc, 'cmdline')))
    # Why CLOSIDs differ from what info/*/num_closids says.
    counts = [r.num_closids for r in caps.caches.values()]
    counts += [r.num_closids for r in caps.membw.values()]
    if caps.closid_limit and min(counts) > caps.closid_limit:
        doc['notes'].append(
            'Linux %s uses at most %d CLOSIDs (the limit was lifted in '
            '6.16)' % (release, caps.closid_limit))
    if caps.io_alloc:
        doc['notes'].append('io_alloc is enabled: the kernel keeps the '
                            'highest CLOSID for I/O traffic')
    # Why RMIDs differ from what info/L3_MON/num_rmids says.
    if caps.rmid_limit:
        doc['notes'].append(caps.rmid_limit)
    return doc


def cmd_capabilities(rc, args, out):
    if getattr(args, 'capture', None):
        count = capture.capture(args.capture, rc.root)
        out.write('captured %d files of %s and the CPU caches into %s; '
                  'emulate with: rdt-virt-emulator mount --from-tree %s '
                  'MOUNTPOINT\n'
                  % (count, rc.root, args.capture, args.capture))
        return 0
    doc = capabilities_doc(rc, args.proc_root)
    if args.json:
        out.write(json.dumps(doc, indent=2, sort_keys=True) + '\n')
        return 0
    out.write('resctrl:    %s %s\n' % (doc['root'], ','.join(
        doc['mount_options'])))
    out.write('features:   %s\n' % (' '.join(doc['features']) or 'none'))
    out.write('CLOSIDs:    %d   RMIDs: %d\n' % (doc['num_closids'],
                                                doc['num_rmids']))
    for name, res in sorted(doc['caches'].items()):
        sizes = ', '.join('%s: %s KiB' % (d, s // 1024 if s else '?')
                          for d, s in sorted(res['domains'].items()))
        out.write('%-11s mask %s (%d ways), min %d bits; %s\n' % (
            name + ':', res['cbm_mask'], res['ways'],
            res['min_cbm_bits'], sizes))
    for name, res in sorted(doc['membw'].items()):
        out.write('%-11s %s, min %d, step %d, domains %s\n' % (
            name + ':', res['unit'], res['min_bandwidth'],
            res['bandwidth_gran'],
            ','.join(str(d) for d in res['domains'])))
    if 'monitor' in doc:
        out.write('monitoring: %s on domains %s\n' % (
            ' '.join(doc['monitor']['events']),
            ','.join(str(d) for d in doc['monitor']['domains'])))
    if 'package_monitor' in doc:
        out.write('telemetry:  %s on packages %s (%d RMIDs)\n' % (
            ' '.join(doc['package_monitor']['events']),
            ','.join(str(d) for d in doc['package_monitor']['packages']),
            doc['package_monitor']['num_rmids']))
    for note in doc['notes']:
        out.write('note:       %s\n' % note)
    return 0


# groups ----------------------------------------------------------------------

def groups_rows(rc):
    """``[{group, kind, parent, owner, tasks, schemata}]`` of every group."""
    rows = []

    def mons(parent):
        try:
            names = rc.list_mon_groups(parent)
        except exception.ResctrlError:
            return
        for mon in names:
            rows.append({'group': mon, 'kind': 'monitor',
                         'parent': parent or '/',
                         'owner': owner(mon, rc.prefix),
                         'tasks': len(rc.read_tasks(parent, mon)),
                         'schemata': ''})

    for name in [None] + rc.list_groups():
        try:
            text = schemata_mod.format(rc.read_schemata(name))
            tasks = len(rc.read_tasks(name))
        except exception.ResctrlError:
            continue
        rows.append({'group': name or '/', 'kind': 'control',
                     'parent': '', 'owner': owner(name, rc.prefix),
                     'tasks': tasks,
                     'schemata': ' '.join(text.split())})
        mons(name)
    return rows


def cmd_groups(rc, args, out):
    rows = groups_rows(rc)
    if args.json:
        out.write(json.dumps(rows, indent=2) + '\n')
        return 0
    out.write(_table(
        ['GROUP', 'KIND', 'PARENT', 'OWNER', 'TASKS', 'SCHEMATA'],
        [[r['group'], r['kind'], r['parent'], r['owner'], r['tasks'],
          r['schemata']] for r in rows]) + '\n')
    return 0


# top -------------------------------------------------------------------------

def _policy(policy):
    """``mem_bw=20(asked=15),cache_l3=3328``: what the host applies.

    The request is shown beside a value where the host applies something
    else (``<key>_requested`` in the state file).
    """
    if not policy:
        return '-'
    cells = []
    for key, value in sorted(policy.items()):
        if (value is None or key == 'monitor' or
                key.endswith(desired.REQUESTED)):
            continue
        asked = policy.get(key + desired.REQUESTED)
        cells.append('%s=%s%s' % (key, value, '' if asked is None
                                  else '(asked=%s)' % asked))
    return ','.join(cells) or '-'


def _num(value, scale, fmt='%.1f'):
    return '-' if value is None else fmt % (value / scale)


def _level(level, unit, following=...):
    """The controller's level in force in the group shown.

    '-' while it holds nothing back; ``>N`` after it when the controller
    decided another level that the agent's next tick applies.
    """
    def one(value):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return '-'
        return '%d%s' % (value, '%' if unit == 'percent' else
                         ' %s' % _cell(unit or ''))
    if following is ...:
        return one(level)
    return '%s>%s' % (one(level), one(following))


def top_table(doc):
    """The per-instance table of a state document, as text."""
    host = doc.get('host', {})
    lines = ['TIME %s  interval %.0fs  instances %d  monitored %d  '
             'coverage %.0f%%%s' % (
                 _clock(doc.get('time', 0)),
                 doc.get('interval') or 0, host.get('instances', 0),
                 host.get('monitored', 0),
                 100 * (host.get('coverage') or 0),
                 '  (rotating monitoring groups)' if host.get('rotating')
                 else '')]
    if host.get('counter_mode'):
        # Counter assignment: only groups with a counter count bandwidth.
        lines.append('MBM counters: %s mode, %s per domain, %s free, %d '
                     'instances counted (%.0f%%)' % (
                         host['counter_mode'],
                         host.get('mbm_counters_total', '?'),
                         host.get('mbm_counters_available', '?'),
                         host.get('instances_with_counters') or 0,
                         100 * (host.get('counter_coverage') or 0)))
    part = host.get('controller')
    unit = part.get('unit') if isinstance(part, dict) else None
    for dom, entry in sorted(((part or {}).get('domains') or {}).items()
                             if isinstance(part, dict) else ()):
        if not isinstance(entry, dict):
            continue
        members = entry.get('members')
        if isinstance(members, list) and len(members) > 1:
            # Domains that share memory: one pool, named by its first.
            dom = '%s (pool of %s)' % (dom, ','.join(
                _cell(str(m)) for m in members))
        lines.append('Controller domain %s: pressure %s, capacity %s GB/s '
                     '(%s), %s throttled, %s active high: %s' % (
                         _cell(dom), _num(entry.get('pressure'), 0.01,
                                          '%.0f%%'),
                         _num(entry.get('capacity_bps'), 1e9),
                         _cell(entry.get('capacity_source') or 'unknown'),
                         entry.get('throttled', 0),
                         entry.get('active_high', 0),
                         _cell(entry.get('reason') or '')))
    rows = []
    for uuid, inst in sorted(doc.get('instances', {}).items(),
                             key=lambda kv: (kv[1].get('name') or '',
                                             kv[0])):
        rows.append([
            _short(_cell(inst.get('name') or '-')), uuid[:8],
            inst.get('group') or '/',
            _policy(inst.get('policy')),
            _cell(inst.get('priority') or 'normal'),
            _level(inst.get('level'), unit, inst.get('level_next', ...)),
            _num(inst.get('llc_occupancy_bytes'), 1024.0, '%.0f'),
            _num(inst.get('mbm_local_bps'), 1e6),
            _num(inst.get('mbm_total_bps'), 1e6),
            inst.get('reason') or ''])
    rows.append(['HOST', '', '', '', '', '',
                 _num(host.get('llc_occupancy_bytes'), 1024.0, '%.0f'),
                 _num(host.get('mbm_local_bps'), 1e6),
                 _num(host.get('mbm_total_bps'), 1e6), ''])
    header = ['INSTANCE', 'UUID', 'GROUP', 'POLICY', 'CLASS', 'LEVEL',
              'LLC[KiB]', 'MBL[MB/s]', 'MBT[MB/s]', 'NOTE']
    if 'power_watts' in host:
        # Package telemetry (Intel AET): core power before the note.
        header.insert(-1, 'CORE[W]')
        entries = sorted(doc.get('instances', {}).items(),
                         key=lambda kv: (kv[1].get('name') or '', kv[0]))
        for row, (_uuid, inst) in zip(rows, entries):
            row.insert(-1, _num(inst.get('power_watts'), 1.0))
        rows[-1].insert(-1, _num(host.get('power_watts'), 1.0))
    lines.append(_table(header, rows))
    return '\n'.join(lines) + '\n'


# Exit status of ``top`` when the last table it showed is stale: the
# agent stopped publishing (1: no state at all; 2: usage, as argparse).
STALE = 3


def _clock(epoch):
    return time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(epoch))


def stale_line(doc, path, now=None):
    """The warning for a stale document, or None when it is current.

    The pollsters' rule (:func:`rdt_virt.agent.state.is_stale`): the agent
    has not published for three of its intervals, and at least a minute.
    """
    if not state_mod.is_stale(doc, now):
        return None
    return ('STALE: no sample in %s since %s (%.0f s ago; stale after %.0f '
            's): is rdt-virt-agent running?' % (
                path, _clock(doc['time']), state_mod.age(doc, now),
                state_mod.max_age(doc)))


def cmd_top(rc, args, out):
    shown = 0
    stale = False
    while True:
        try:
            doc = state_mod.load(CONF.rdt.state_file)
        except FileNotFoundError:
            doc = None
            out.write('no state in %s: is rdt-virt-agent running?\n' %
                      CONF.rdt.state_file)
        except (OSError, exception.InvalidStateFile) as e:
            # Say what is wrong: the file exists, so "not running" would
            # send the operator to the wrong place.
            doc = None
            out.write('cannot use %s: %s\n' % (CONF.rdt.state_file, e))
        if doc is None:
            if args.once:
                return 1
        else:
            if not args.once:
                out.write('\x1b[H\x1b[2J')
            warning = stale_line(doc, CONF.rdt.state_file)
            stale = warning is not None
            if stale:
                out.write(warning + '\n')
            out.write(top_table(doc))
        out.flush()
        shown += 1
        if args.once or (args.count and shown >= args.count):
            return STALE if stale else 0
        time.sleep(args.interval)


@output.quiet
def main(argv=None, out=None, connect=None):
    """Run ``rdt-virt``; ``connect`` replaces openstacksdk's."""
    out = out or sys.stdout
    parser = argparse.ArgumentParser(
        prog='rdt-virt', description='RDT of this compute host.')
    parser.add_argument('--config-file', action='append', default=[],
                        help='rdt-virt configuration file (repeatable)')
    parser.add_argument('--resctrl-root', help='override [rdt] '
                        'resctrl_root')
    parser.add_argument('--state-file', help='override [rdt] state_file')
    parser.add_argument('--kernel-release-file', help='override [rdt] '
                        'kernel_release_file')
    parser.add_argument('--proc-root', default='/proc',
                        help='where procfs is mounted (for the CPU model '
                        'and the kernel command line)')
    sub = parser.add_subparsers(dest='command', required=True)
    for name in ('capabilities', 'groups'):
        cmd = sub.add_parser(name, aliases=['caps'] if name == 'capabilities'
                             else [])
        cmd.add_argument('--json', action='store_true')
    sub.choices['capabilities'].add_argument(
        '--capture', metavar='DIR', help='write a copy of resctrl (info/, '
        'default group, mon_data) and the CPU cache topology into DIR, for '
        'rdt-virt-emulator mount --from-tree DIR')
    top = sub.add_parser('top', help='live per-instance table')
    top.add_argument('--interval', type=float, default=2.0)
    top.add_argument('--once', action='store_true')
    top.add_argument('--count', type=int, default=0)
    audit = sub.add_parser(
        'flavor-audit', help='flavors whose RDT extra specs lack their '
        'Placement keys, and the commands that fix them')
    audit.add_argument('--os-cloud', help='cloud name in clouds.yaml '
                       '(default: the OS_* environment variables)')
    args = parser.parse_args(argv)
    if args.command == 'flavor-audit':
        return flavor_audit.run(args, out, sys.stderr, connect)

    conf_args = []
    for path in args.config_file:
        conf_args += ['--config-file', path]
    CONF(conf_args, project='rdt-virt', prog='rdt-virt',
         default_config_files=[] if conf_args else None)
    if args.resctrl_root:
        CONF.set_override('resctrl_root', args.resctrl_root, 'rdt')
    if args.kernel_release_file:
        CONF.set_override('kernel_release_file', args.kernel_release_file,
                          'rdt')
    if args.state_file:
        CONF.set_override('state_file', args.state_file, 'rdt')
    rc = fs.Resctrl(CONF.rdt.resctrl_root, CONF.rdt.group_prefix,
                    osrelease=CONF.rdt.kernel_release_file)
    commands = {'capabilities': cmd_capabilities, 'caps': cmd_capabilities,
                'groups': cmd_groups, 'top': cmd_top}
    try:
        return commands[args.command](rc, args, out)
    except exception.RDTVirtException as e:
        sys.stderr.write('rdt-virt: %s\n' % e)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == '__main__':
    sys.exit(main())
