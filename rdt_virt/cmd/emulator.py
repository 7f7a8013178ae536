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

"""``rdt-virt-emulator``: mount and drive the emulated resctrl filesystem.

::

    rdt-virt-emulator mount --profile reference [--kernel 6.1+bw_validate]
        [--cmdline 'rdt=l3cat'] [--control SOCK] MOUNTPOINT
    rdt-virt-emulator mount --foreground ... MOUNTPOINT
    rdt-virt-emulator mount --mba-effect ... MOUNTPOINT
    rdt-virt-emulator umount MOUNTPOINT
    rdt-virt-emulator profiles
    rdt-virt-emulator kernels
    rdt-virt-emulator render --profile amd DIR
    rdt-virt-emulator mount --from-tree DIR [--mon-scale BYTES] MOUNTPOINT
    rdt-virt-emulator topology --profile reference [--cpus 0-1]
    rdt-virt-emulator ctl --control SOCK ping|status|log|truth|remount|
        set-counter|set-rate|set-sentinel|clear|reset|set-limbo-delay|
        limbo|set-limbo-occupancy|hardware-reset ...

``mount`` runs in the background by default and prints the pid of the
process serving the mount once the mount is up.
"""

import argparse
import json
import sys

from oslo_config import cfg
from oslo_log import log as logging

from rdt_virt.cmd import output
from rdt_virt.emulator import control
from rdt_virt.emulator import fromtree
from rdt_virt.emulator import kernels
from rdt_virt.emulator import launcher
from rdt_virt.emulator import profiles

LOG = logging.getLogger(__name__)

_CTL_OPS = ('ping', 'status', 'log', 'truth', 'remount', 'set-counter',
            'set-rate', 'set-sentinel', 'clear', 'reset', 'set-limbo-delay',
            'limbo', 'set-limbo-occupancy', 'hardware-reset')


def _setup_logging(debug):
    conf = cfg.ConfigOpts()
    logging.register_options(conf)
    conf([], project='rdt-virt', default_config_files=[])
    # stdout carries the command's output (the pid, JSON).
    conf.set_override('use_stderr', True)
    if debug:
        conf.set_override('debug', True)
    logging.setup(conf, 'rdt-virt-emulator')


def _parser():
    parser = argparse.ArgumentParser(
        prog='rdt-virt-emulator',
        description='Emulated Linux resctrl filesystem (FUSE) for hosts '
                    'without RDT hardware.')
    parser.add_argument('--debug', action='store_true',
                        help='log debugging messages')
    sub = parser.add_subparsers(dest='command', required=True)

    p = sub.add_parser('mount', help='mount the emulated resctrl')
    p.add_argument('--profile', default='reference',
                   help='hardware profile (see "profiles")')
    p.add_argument('--control', metavar='SOCKET',
                   help='path of the control socket')
    p.add_argument('--foreground', action='store_true',
                   help='serve in this process until unmounted')
    p.add_argument('--kernel', metavar='SPEC',
                   help='kernel release and features to emulate, e.g. 6.1, '
                        '6.1+bw_validate or newest-mon_rename (see '
                        '"kernels"; default: newest, or with --from-tree '
                        'the release the capture names or its files show)')
    p.add_argument('--legacy-kernel', action='store_true',
                   help='same as --kernel 6.1')
    p.add_argument('--from-tree', metavar='DIR',
                   help='emulate the host captured in DIR (rdt-virt '
                        'capabilities --capture DIR) instead of a profile')
    p.add_argument('--mon-scale', type=int, metavar='BYTES',
                   help='with --from-tree: bytes per counter unit, which a '
                        'capture cannot show (default: 65536 on Intel, 64 '
                        'on AMD and Arm)')
    p.add_argument('--cmdline', metavar='TEXT',
                   help='kernel command line of the emulated boot (default: '
                        'the profile\'s); e.g. "" to boot the reference '
                        'host without rdt=l3cat')
    p.add_argument('--limbo-delay', type=float, metavar='SECONDS',
                   help='seconds a freed RMID stays busy (default 1)')
    p.add_argument('--mba-effect', action='store_true',
                   help='MB throttles also slow the throttled threads down '
                        '(CPU quotas through cgroups), not only the counters')
    p.add_argument('--log-file', help='output of the background process')
    p.add_argument('--osrelease', metavar='FILE',
                   help='write the emulated kernel release here, for '
                        '[rdt] kernel_release_file (default: a file in a '
                        'private temporary directory, logged)')
    p.add_argument('mountpoint')

    p = sub.add_parser('umount', help='unmount an emulated resctrl')
    p.add_argument('mountpoint')

    sub.add_parser('profiles', help='list the hardware profiles')
    sub.add_parser('kernels', help='list the kernel releases and the '
                                   'features they have')

    p = sub.add_parser('render', help='write a profile as a captured tree')
    p.add_argument('--profile', default='reference')
    p.add_argument('--kernel', metavar='SPEC')
    p.add_argument('directory')

    p = sub.add_parser('topology', help='print the CPU cache sysfs files '
                                        'a profile presents, as JSON')
    p.add_argument('--profile', default='reference')
    p.add_argument('--cpus', help='online CPU list (default: this host)')

    p = sub.add_parser('ctl', help='send a request to a running emulator')
    p.add_argument('--control', metavar='SOCKET', required=True)
    p.add_argument('op', choices=sorted(_CTL_OPS))
    p.add_argument('--group', default='/', help='group path, e.g. g1 or '
                                                'g1/mon_groups/m1')
    p.add_argument('--domain', type=int)
    p.add_argument('--event')
    p.add_argument('--value', type=int)
    p.add_argument('--rate', type=float, help='bytes per second')
    p.add_argument('--sentinel', help='Unavailable, Error, Unassigned or '
                                      '"none" to stop')
    p.add_argument('--since', type=int, default=0)
    p.add_argument('--profile')
    p.add_argument('--seconds', type=float)
    p.add_argument('--rmid', type=int, help='an RMID in limbo')
    return parser


def _ctl_args(args):
    where = {'domain': args.domain, 'event': args.event}
    sentinel = None if (args.sentinel or '').lower() == 'none' else (
        args.sentinel)
    return {
        'ping': {}, 'status': {}, 'truth': {},
        'log': {'since': args.since},
        'remount': {'profile': args.profile},
        'set-counter': dict(where, group=args.group, value=args.value),
        'set-rate': dict(where, group=args.group, rate=args.rate),
        'set-sentinel': dict(where, group=args.group, sentinel=sentinel),
        'clear': dict(where, group=args.group),
        'reset': {'group': args.group},
        'set-limbo-delay': {'seconds': args.seconds},
        'limbo': {},
        'hardware-reset': dict(where, group=args.group,
                               seconds=args.seconds or 1.0),
        'set-limbo-occupancy': {'rmid': args.rmid, 'value': args.value,
                                'domain': args.domain},
    }[args.op]


def _mount(args):
    spec = args.kernel or ('6.1' if args.legacy_kernel else None)
    why = 'given' if spec else 'the newest release'
    if args.from_tree:
        profile = profiles.get_profile(
            fromtree.load(args.from_tree, mon_scale=args.mon_scale),
            args.cmdline)
        if not spec:
            spec, why = fromtree.guess_kernel(args.from_tree)
    else:
        profile = profiles.get_profile(args.profile, args.cmdline)
    kernel = kernels.get_kernel(spec)
    if args.from_tree and not args.foreground:
        # stdout carries the pid: the assumptions go to stderr.
        for line in fromtree.assumptions(profile, kernel, why,
                                         args.limbo_delay,
                                         bool(args.mon_scale)):
            print('rdt-virt-emulator: assumed %s' % line, file=sys.stderr)
    if args.foreground:
        launcher.check_prerequisites(args.mountpoint)
        if not args.control:
            raise launcher.EmulatorError('--foreground needs --control')
        LOG.info('Serving emulated resctrl (%s, Linux %s) on %s, control '
                 'socket %s', profile.name, kernel.spec, args.mountpoint,
                 args.control)
        launcher.serve(args.mountpoint, profile, args.control,
                       limbo_delay=args.limbo_delay, debug=args.debug,
                       kernel=kernel, mba_effect=args.mba_effect)
        return 0
    handle = launcher.mount(args.mountpoint, profile, args.control,
                            kernel=kernel, cmdline=args.cmdline,
                            from_tree=args.from_tree,
                            limbo_delay=args.limbo_delay,
                            log_path=args.log_file, debug=args.debug,
                            mba_effect=args.mba_effect,
                            osrelease=args.osrelease,
                            mon_scale=args.mon_scale)
    LOG.info('Emulated resctrl (%s) mounted on %s; control socket %s, '
             'log %s, kernel release in %s', profile.name,
             handle.mountpoint, handle.control_socket, handle.log_path,
             handle.osrelease)
    print(handle.pid)
    return 0


def _topology(args):
    profile = profiles.get_profile(args.profile)
    if args.cpus:
        from rdt_virt.emulator import kparse
        cpus = kparse.parse_cpulist(args.cpus, 1 << 16)
        nr_cpu_ids = max(cpus) + 1
    else:
        cpus, nr_cpu_ids = launcher.host_cpus()
    print(json.dumps(profile.sysfs_cache_files(cpus, nr_cpu_ids),
                     indent=1, sort_keys=True))
    return 0


def _kernels():
    print('releases: %s (newest = %s)' % (', '.join(kernels.RELEASES),
                                          kernels.NEWEST))
    for release in kernels.RELEASES:
        print('%-5s %s' % (release, ' '.join(
            f for f in kernels.FEATURES
            if f in kernels.release_features(release)) or '-'))
    print()
    for name, release, commit, summary in kernels.describe():
        print('%-19s %-5s %s\n%25s%s' % (name, release, commit, '', summary))
    return 0


@output.quiet
def main(argv=None):
    args = _parser().parse_args(argv)
    _setup_logging(args.debug)
    try:
        if args.command == 'mount':
            return _mount(args)
        if args.command == 'umount':
            if not launcher.unmount(args.mountpoint):
                raise launcher.EmulatorError('cannot unmount %s'
                                             % args.mountpoint)
            return 0
        if args.command == 'profiles':
            for name, prof in sorted(profiles.PROFILES.items()):
                print('%-11s %s' % (name, prof.description))
            return 0
        if args.command == 'kernels':
            return _kernels()
        if args.command == 'render':
            print(fromtree.render(args.profile, args.directory,
                                  kernel=args.kernel))
            return 0
        if args.command == 'topology':
            return _topology(args)
        client = control.ControlClient(args.control)
        result = client.call(args.op.replace('-', '_'), **_ctl_args(args))
        print(json.dumps(result, indent=1, sort_keys=True))
        return 0
    except (launcher.EmulatorError, control.ControlError,
            profiles.UnknownProfile, kernels.UnknownKernel,
            fromtree.TreeError) as e:
        print('rdt-virt-emulator: error: %s' % e, file=sys.stderr)
        return 1


if __name__ == '__main__':
    sys.exit(main())
