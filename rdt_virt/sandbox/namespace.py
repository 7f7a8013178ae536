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

"""The sandbox's first process, run inside its private mount namespace.

``rdt-virt-sandbox start`` mounts the emulated resctrl in the sandbox
directory and runs ``unshare --mount --propagation private`` with this
module as the command. It binds that mount on ``/sys/fs/resctrl``, builds
the other mounts, starts virtlogd and libvirtd, writes ``ready.json`` into
the sandbox directory and then holds the namespace until it gets SIGTERM,
when it stops the guests and daemons. Only this process and its children
see the mounts; they disappear with the namespace.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

from rdt_virt.emulator import fromtree
from rdt_virt.emulator import launcher as emulator
from rdt_virt.emulator import profiles
from rdt_virt.sandbox import layout

SYS_FS = '/sys/fs'
CPU_SYSFS = '/sys/devices/system/cpu'
RESCTRL = '/sys/fs/resctrl'

# Daemon command lines; the pid files live in the private /run/libvirt.
# libvirtd keeps its QEMU capability cache only while the host CPUID it
# reads stays the same, and some hypervisors give each vCPU a different
# one; pinned, it reads the same every time and the sandbox starts in half
# a second instead of eight. libvirt gives QEMU all host CPUs regardless.
VIRTLOGD = ['virtlogd', '--daemon', '--pid-file', '/run/libvirt/virtlogd.pid']
LIBVIRTD = ['taskset', '--cpu-list', '0', 'libvirtd', '--daemon', '--pid-file',
            '/run/libvirt/libvirtd.pid']
QEMU_CONF = '''
# Added by rdt-virt-sandbox: /dev/kvm is root-only here and there is no
# systemd to hand QEMU a user; without this libvirt re-probes QEMU on every
# call.
user = "root"
group = "root"
# Keep QEMU in the sandbox's mount namespace (libvirt gives each QEMU one
# of its own by default), so stopping the sandbox finds every QEMU.
namespaces = []
'''

LIBVIRTD_CONF = '''
# Added by rdt-virt-sandbox: there is no D-Bus for polkit here. On a host
# polkit's default policy lets any user use the read-only socket
# (org.libvirt.unix.monitor); "none" does the same without it.
auth_unix_ro = "none"
'''


def listen_conf(address, hostname=None):
    """(libvirtd.conf, qemu.conf) additions for live migration.

    The sandbox's libvirtd listens on TCP on *address* (a loopback address
    of its own: the sandboxes share the machine's network namespace), and
    QEMU's migration streams and NBD disk copies use that address too.
    There are no credentials (``auth_tcp = "none"``): only loopback
    reaches it. libvirt refuses to migrate a guest to a host with its own
    host UUID, which it reads from the machine's SMBIOS, the same for every
    sandbox here; each gets one derived from its name and address.
    """
    host_uuid = uuid.uuid5(uuid.NAMESPACE_DNS, '%s.%s.rdt-virt-sandbox' % (
        hostname or 'sandbox', address))
    libvirtd = ('\n# Added by rdt-virt-sandbox --listen: TCP on a loopback '
                'address, no\n# credentials.\n'
                'listen_tls = 0\nlisten_tcp = 1\nlisten_addr = "%s"\n'
                'auth_tcp = "none"\nhost_uuid = "%s"\n' % (address,
                                                           host_uuid))
    qemu = ('\n# Added by rdt-virt-sandbox --listen: incoming migrations '
            'and disk\n# copies on the same address.\n'
            'migration_address = "%s"\nmigration_host = "%s"\n' % (
                address, address))
    return libvirtd, qemu


def _run(*cmd):
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode:
        raise RuntimeError('%s failed (%d): %s' % (
            ' '.join(cmd), proc.returncode, proc.stderr.strip()))


def _log(msg):
    print('%.3f %s' % (time.time(), msg), flush=True)


def mount_sys_fs(paths):
    """Put a tmpfs over /sys/fs with ``cgroup`` and ``resctrl`` in it."""
    saved = paths.ns('cgroup')
    os.makedirs(saved, exist_ok=True)
    _run('mount', '--rbind', SYS_FS + '/cgroup', saved)
    _run('mount', '-t', 'tmpfs', '-o', 'mode=755,size=1m',
         'rdt-virt-sandbox', SYS_FS)
    for name in ('cgroup', 'resctrl'):
        os.mkdir(os.path.join(SYS_FS, name))
    _run('mount', '--move', saved, SYS_FS + '/cgroup')


def overlay_cpu_caches(paths, profile):
    """Present the profile's CPU cache topology in /sys/devices/system/cpu."""
    online, nr_cpu_ids = emulator.host_cpus(CPU_SYSFS)
    files = profile.sysfs_cache_files(online, nr_cpu_ids)
    base = paths.ns('cpu')
    cpus = set()
    for rel, text in files.items():
        path = os.path.join(base, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
        cpus.add(rel.split('/', 1)[0])
    for cpu in sorted(cpus):
        _run('mount', '--bind', os.path.join(base, cpu, 'cache'),
             os.path.join(CPU_SYSFS, cpu, 'cache'))


def private_libvirt(paths, listen=None, hostname=None):
    """Bind private copies of libvirt's config and state directories.

    *listen*: the address libvirtd listens on (see :func:`listen_conf`).
    """
    etc = paths.private('/etc/libvirt')
    os.makedirs(os.path.join(etc, 'qemu', 'networks'), exist_ok=True)
    # Only the daemons' configuration files: the host's domain and network
    # definitions (some set to autostart) stay out of the sandbox.
    for name in os.listdir('/etc/libvirt'):
        src = os.path.join('/etc/libvirt', name)
        if os.path.isfile(src):
            shutil.copy2(src, etc)
    libvirtd, qemu = listen_conf(listen, hostname) if listen else ('', '')
    with open(os.path.join(etc, 'qemu.conf'), 'a') as f:
        f.write(QEMU_CONF + qemu)
    with open(os.path.join(etc, 'libvirtd.conf'), 'a') as f:
        f.write(LIBVIRTD_CONF + libvirtd)
    for target in layout.PRIVATE_DIRS:
        src = paths.private(target)
        os.makedirs(src, exist_ok=True)
        os.makedirs(target, exist_ok=True)
        _run('mount', '--bind', src, target)


def wait_for(path, what, timeout, check=None):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if check:
            check()
        if time.monotonic() > deadline:
            raise RuntimeError('%s did not appear within %ss' % (what,
                                                                 timeout))
        time.sleep(0.05)


def start_daemons(listen=False):
    _run(*VIRTLOGD)
    wait_for('/run/libvirt/virtlogd-sock', 'virtlogd socket', 30)
    # --listen: the TCP socket of libvirtd.conf's listen_tcp as well.
    _run(*(LIBVIRTD + (['--listen'] if listen else [])))
    wait_for('/run/libvirt/libvirt-sock', 'libvirtd socket', 60)


def warm_up(timeout):
    """Wait until libvirtd answers and has probed QEMU.

    The first probe takes 5-8 s; doing it here spares the first caller.
    """
    import libvirt

    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = libvirt.open('qemu:///system')
            break
        except libvirt.libvirtError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        conn.getCapabilities()
        conn.getDomainCapabilities(None, 'x86_64', None, 'kvm', 0)
    finally:
        conn.close()


def _pidfile(path):
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def teardown(ident):
    """Stop the guests and the daemons."""
    try:
        import libvirt
        conn = libvirt.open('qemu:///system')
        for dom in conn.listAllDomains():
            try:
                if dom.isActive():
                    dom.destroy()
            except libvirt.libvirtError as e:
                _log('destroying %s: %s' % (dom.name(), e))
        conn.close()
    except Exception as e:
        _log('stopping guests: %s' % e)
    for pidfile in ('/run/libvirt/libvirtd.pid', '/run/libvirt/virtlogd.pid'):
        pid = _pidfile(pidfile)
        if pid:
            layout.terminate([pid])
    # Anything else in the namespace (a QEMU libvirt lost) but us.
    layout.terminate([p for p in layout.namespace_pids(layout.mntns(), ident)
                      if p != os.getpid()])


def main(argv=None):
    parser = argparse.ArgumentParser(prog='rdt-virt-sandbox-namespace')
    parser.add_argument('--dir', required=True)
    parser.add_argument('--profile', default='reference')
    parser.add_argument('--from-tree', help='a captured host to emulate')
    parser.add_argument('--cache-dir')
    parser.add_argument('--resctrl', required=True,
                        help='the emulated resctrl, mounted outside')
    parser.add_argument('--hostname', help='host name inside (needs a UTS '
                        'namespace): what libvirt, and so Nova, report')
    parser.add_argument('--listen', metavar='ADDRESS',
                        help='libvirtd also listens on TCP on this loopback '
                        'address, without credentials (live migration)')
    args = parser.parse_args(argv)
    paths = layout.Paths(args.dir, args.cache_dir)
    if args.from_tree:
        profile = fromtree.load(args.from_tree)
    else:
        profile = profiles.get_profile(args.profile)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    signal.signal(signal.SIGINT, lambda *_: stop.append(True))
    ident = None
    try:
        if args.hostname:
            socket.sethostname(args.hostname)
        mount_sys_fs(paths)
        ident = layout.write_marker()
        _run('mount', '--bind', args.resctrl, RESCTRL)
        overlay_cpu_caches(paths, profile)
        private_libvirt(paths, args.listen, args.hostname)
        _log('mounts ready')
        start_daemons(bool(args.listen))
        _log('daemons started')
        t0 = time.monotonic()
        warm_up(120)
        _log('warm-up took %.1fs' % (time.monotonic() - t0))
        layout.write_ready(paths, {
            'pid': os.getpid(),
            'mntns': layout.mntns(),
            'id': ident,
            'profile': profile.name,
        })
        _log('ready')
        while not stop:
            time.sleep(0.2)
    except Exception as e:
        _log('sandbox failed: %s' % e)
        teardown(ident)
        return 1
    _log('stopping')
    teardown(ident)
    _log('stopped')
    return 0


if __name__ == '__main__':
    sys.exit(main())
