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

"""``rdt-virt-sandbox``: an emulated RDT host with its own libvirtd.

::

    rdt-virt-sandbox start [--dir DIR] [--profile reference] [--kernel SPEC]
        [--cache-dir C]
    rdt-virt-sandbox run [--dir DIR] [--profile reference] [--kernel SPEC]
        [--cache-dir C]
    rdt-virt-sandbox status [--dir DIR]
    rdt-virt-sandbox stop [--dir DIR]
    rdt-virt-sandbox guest-image [--program burn|idle|work] PATH
    rdt-virt-sandbox guest-xml --image PATH [--vcpus N] [--serial-file F] NAME
    rdt-virt-sandbox cloud up|flow|status|down [--dir DIR] [--gnocchi-bin B]
                                               [--metric-client-bin B]
    rdt-virt-sandbox cloud upgrade --to-bin B [--releases OLD:NEW] [...]

``start`` prints how to reach the sandbox: the libvirt URI, the emulated
resctrl path, the emulator's control socket and the command that enters the
namespace, and returns. ``run`` does the same, then stays in the foreground
until SIGTERM or SIGINT and stops the sandbox: the form a service manager
(systemd, DevStack's run_process) wants. Both need root, /dev/kvm,
/dev/fuse, libvirt and QEMU. MB throttles slow the throttled vCPUs down
(cgroup CPU quotas, see :mod:`rdt_virt.emulator.enforce`) unless
``--no-mba-effect`` is given. ``cloud`` runs a whole OpenStack cloud on
two sandboxes (:mod:`rdt_virt.cloud.cloud`); ``cloud upgrade`` brings it
up on the release of its own environment and upgrades it, servers running,
to the release of ``--to-bin``'s (:mod:`rdt_virt.cloud.upgrade`).
"""

import argparse
import os
import signal
import sys
import time

from rdt_virt.cloud import cloud as cloud_mod
from rdt_virt.cloud import flow as flow_mod
from rdt_virt.cloud import process
from rdt_virt.cloud import upgrade as upgrade_mod
from rdt_virt.cmd import output
from rdt_virt.emulator import control
from rdt_virt.emulator import fromtree
from rdt_virt.emulator import kernels
from rdt_virt.emulator import profiles
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import launcher

DEFAULT_DIR = '/var/lib/rdt-virt/sandbox'
DEFAULT_CACHE = '/var/cache/rdt-virt/sandbox-libvirt'


def _kernel(sb):
    try:
        return sb.control.status()['kernel']
    except control.ControlError as e:
        return 'unknown (%s)' % e


def _describe(sb):
    return '\n'.join([
        'profile:        %s' % sb.info['profile'],
        'kernel:         %s' % _kernel(sb),
        'libvirt URI:    %s' % sb.uri,
        'resctrl:        %s' % sb.resctrl_root,
        'osrelease:      %s' % sb.kernel_release_file,
        'emulator ctl:   rdt-virt-emulator ctl --control %s status' %
        sb.paths.control,
        'enter:          %s' % sb.enter_command(),
        'virsh:          virsh -c \'%s\' list' % sb.uri,
    ])


def _wait_for_signal():
    stop = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.append(True))
    while not stop:
        time.sleep(0.5)


def cloud_main(args):
    cloud = cloud_mod.Cloud(args.dir, gnocchi_bin=args.gnocchi_bin,
                            metric_client_bin=args.metric_client_bin)
    try:
        if args.action == 'up':
            cloud.up()
        elif args.action == 'flow':
            flow_mod.Flow(cloud).run()
        elif args.action == 'upgrade':
            if not args.to_bin:
                print('rdt-virt-sandbox cloud upgrade: --to-bin is needed',
                      file=sys.stderr)
                return 2
            upgrade_mod.check_releases(args.releases, args.to_bin)
            return 0 if upgrade_mod.Upgrade(cloud, args.to_bin).run() else 1
        elif args.action == 'down':
            cloud.down()
            print('down; removed %s' % args.dir)
        else:
            rows = cloud.status()
            if not rows:
                print('no cloud in %s' % args.dir)
                return 3
            for row in rows:
                print('%-36s %-8s %s' % row)
            return 0 if all(r[2] == 'up' for r in rows) else 3
    except (cloud_mod.CloudError, process.ProcessError, flow_mod.FlowError,
            launcher.SandboxError, upgrade_mod.UpgradeError) as e:
        print('rdt-virt-sandbox cloud: %s' % e, file=sys.stderr)
        return 1
    return 0


@output.quiet
def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='rdt-virt-sandbox',
        description='An emulated RDT host running a private libvirtd.')
    sub = parser.add_subparsers(dest='command', required=True)
    for name in ('start', 'run', 'status', 'stop'):
        cmd = sub.add_parser(name)
        cmd.add_argument('--dir', default=DEFAULT_DIR,
                         help='sandbox directory (default %(default)s)')
    for name in ('start', 'run'):
        cmd = sub.choices[name]
        cmd.add_argument('--profile', default='reference',
                         choices=sorted(profiles.PROFILES),
                         help='emulated hardware (default %(default)s)')
        cmd.add_argument('--kernel', metavar='SPEC',
                         help='emulated kernel release and features, e.g. '
                              '6.1 or 6.1+bw_validate (default: newest; '
                              'see "rdt-virt-emulator kernels")')
        cmd.add_argument('--from-tree', metavar='DIR',
                         help='emulate the host captured in DIR instead of '
                              'a profile')
        cmd.add_argument('--cmdline', metavar='TEXT',
                         help='emulated kernel command line (default: the '
                              'profile\'s, e.g. rdt=l3cat for reference)')
        cmd.add_argument('--hostname', help='host name inside the sandbox '
                         '(its own UTS namespace), which libvirt reports and '
                         'Nova names its node after (default: the '
                         "machine's)")
        cmd.add_argument('--listen', metavar='ADDRESS',
                         help='libvirtd also listens on TCP on this loopback '
                              'address (e.g. 127.0.0.2), without '
                              'credentials: live migration between '
                              'sandboxes')
        cmd.add_argument('--cache-dir', default=DEFAULT_CACHE,
                         help="libvirt's QEMU capability cache, kept across "
                              "sandboxes (default %(default)s)")
        cmd.add_argument('--no-mba-effect', dest='mba_effect',
                         action='store_false',
                         help='MB throttles scale the emulated counters '
                              'only; they do not slow the vCPUs down')
    image = sub.add_parser('guest-image',
                           help='write a boot image for tiny guests')
    image.add_argument('--program', choices=sorted(guest.PROGRAMS),
                       default='burn')
    image.add_argument('path')
    xml = sub.add_parser('guest-xml', help='print a tiny guest domain XML')
    xml.add_argument('--image', required=True)
    xml.add_argument('--vcpus', type=int, default=1)
    xml.add_argument('--serial-file',
                     help='put the serial port on this file (a "work" '
                          'guest reports its progress there)')
    xml.add_argument('name')
    cloud = sub.add_parser('cloud', help='a real OpenStack cloud on two '
                           'emulated RDT hosts')
    cloud.add_argument('action', choices=('up', 'down', 'status', 'flow',
                                          'upgrade'))
    cloud.add_argument('--dir', default=cloud_mod.DEFAULT_DIR,
                       help='the cloud directory (default %(default)s)')
    cloud.add_argument('--gnocchi-bin', default=os.environ.get(
        'RDT_VIRT_GNOCCHI_BIN'), help="bin directory of Gnocchi's "
        "environment (default $RDT_VIRT_GNOCCHI_BIN)")
    cloud.add_argument('--metric-client-bin', default=os.environ.get(
        'RDT_VIRT_METRIC_CLIENT_BIN'), help='bin directory of an '
        'environment with openstackclient and python-observabilityclient '
        'but not gnocchiclient, whose "openstack metric" the flow types '
        'for Prometheus and Aetos (default $RDT_VIRT_METRIC_CLIENT_BIN)')
    cloud.add_argument('--to-bin', default=os.environ.get(
        'RDT_VIRT_CLOUD_UPGRADE_BIN'), help='upgrade: bin directory of the '
        "new release's environment, e.g. .tox/cloud-2026.1/bin (default "
        '$RDT_VIRT_CLOUD_UPGRADE_BIN)')
    cloud.add_argument('--releases', default=os.environ.get(
        'RDT_VIRT_CLOUD_UPGRADE', '2025.1:2026.1'), help='upgrade: OLD:NEW, '
        'checked against the two environments\' Nova (default '
        '$RDT_VIRT_CLOUD_UPGRADE or %(default)s)')
    args = parser.parse_args(argv)

    if args.command == 'cloud':
        return cloud_main(args)
    if args.command == 'guest-image':
        print(guest.write_image(args.path, args.program))
        return 0
    if args.command == 'guest-xml':
        print(guest.domain_xml(args.name, args.image, vcpus=args.vcpus,
                               serial_file=args.serial_file))
        return 0

    try:
        sb = launcher.Sandbox(args.dir, getattr(args, 'profile', 'reference'),
                              getattr(args, 'cache_dir', None),
                              kernel=getattr(args, 'kernel', None),
                              cmdline=getattr(args, 'cmdline', None),
                              mba_effect=getattr(args, 'mba_effect', True),
                              from_tree=getattr(args, 'from_tree', None),
                              hostname=getattr(args, 'hostname', None),
                              listen=getattr(args, 'listen', None))
    except (kernels.UnknownKernel, fromtree.TreeError,
            launcher.SandboxError) as e:
        print('rdt-virt-sandbox: %s' % e, file=sys.stderr)
        return 2
    try:
        if args.command in ('start', 'run'):
            sb.start()
            print(_describe(sb), flush=True)
            if args.command == 'run':
                _wait_for_signal()
                sb.stop()
                print('stopped')
        elif args.command == 'status':
            if not sb.running():
                print('not running (%s)' % args.dir)
                return 3
            print(_describe(sb))
        else:
            sb.stop()
            print('stopped')
    except launcher.SandboxError as e:
        print('rdt-virt-sandbox: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
