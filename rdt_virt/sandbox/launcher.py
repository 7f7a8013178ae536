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

"""Start, find and stop a sandbox from outside its namespace."""

import ipaddress
import os
import shutil
import subprocess
import sys
import time

from rdt_virt.emulator import control
from rdt_virt.emulator import fromtree
from rdt_virt.emulator import kernels
from rdt_virt.emulator import launcher as emulator
from rdt_virt.emulator import profiles
from rdt_virt.sandbox import layout

REQUIRED_TOOLS = ('unshare', 'mount', 'libvirtd', 'virtlogd',
                  'qemu-system-x86_64', 'fusermount3')


class SandboxError(Exception):
    """The sandbox could not be started or is not running."""


def missing_prerequisites():
    """Reasons this machine cannot run a sandbox (empty when it can)."""
    reasons = []
    if os.geteuid() != 0:
        reasons.append('needs root (mount namespaces, /dev/kvm, libvirtd)')
    for dev in ('/dev/kvm', '/dev/fuse'):
        if not os.access(dev, os.R_OK | os.W_OK):
            reasons.append('%s is not usable' % dev)
    for tool in REQUIRED_TOOLS:
        if not shutil.which(tool, path=os.environ.get('PATH', '') +
                            ':/usr/sbin:/sbin'):
            reasons.append('%s is not installed' % tool)
    return reasons


class Sandbox(object):
    """An emulated RDT host with its own libvirtd.

    :param directory: the sandbox directory (created; runtime state inside
        it is replaced on start).
    :param profile: emulated hardware profile name.
    :param cache_dir: directory kept across sandboxes for libvirt's QEMU
        capability cache (optional).
    :param kernel: emulated kernel spec (see
        :mod:`~rdt_virt.emulator.kernels`; default: the newest release).
    :param cmdline: emulated kernel command line (default: the profile's).
    :param from_tree: emulate the host captured in this directory instead
        of a built-in profile (see :mod:`~rdt_virt.emulator.fromtree`).
    :param mba_effect: MB throttles slow the throttled threads (guests'
        vCPUs) down, not only the emulated counters (see
        :mod:`rdt_virt.emulator.enforce`).
    :param listen: a loopback address (``127.0.0.2``) on which libvirtd
        also listens on TCP, without credentials, for live migrations
        between sandboxes (see :func:`rdt_virt.sandbox.namespace.listen_conf`).
    """

    def __init__(self, directory, profile='reference', cache_dir=None,
                 kernel=None, cmdline=None, from_tree=None, mba_effect=True,
                 hostname=None, listen=None):
        self.paths = layout.Paths(directory, cache_dir)
        # Loopback only: the TCP socket has no authentication.
        if listen is not None and not _is_loopback(listen):
            raise SandboxError('libvirtd listens without credentials, so '
                               'only on a loopback address, not %r' % listen)
        self.listen = listen
        # Its own host name (UTS namespace): two sandboxes on one machine
        # are two hypervisors to Nova, which names nodes after libvirt's
        # host name.
        self.hostname = hostname
        self.from_tree = from_tree and os.path.abspath(from_tree)
        if self.from_tree:
            self.profile = fromtree.load(self.from_tree).name
        else:
            self.profile = profiles.get_profile(profile).name
        self.kernel = kernels.get_kernel(kernel).spec
        self.cmdline = cmdline
        self.mba_effect = mba_effect
        self.info = layout.read_ready(self.paths)

    # Where things are ------------------------------------------------------

    @property
    def pid(self):
        """Pid of the process holding the namespace."""
        return self.info and self.info['pid']

    @property
    def tcp_uri(self):
        """libvirt URI of the TCP socket (None unless it listens)."""
        if not self.listen:
            return None
        host = '[%s]' % self.listen if ':' in self.listen else self.listen
        return 'qemu+tcp://%s/system' % host

    @property
    def uri(self):
        """libvirt URI of the sandbox's libvirtd, usable from outside."""
        return 'qemu:///system?socket=%s' % self.paths.libvirt_socket

    @property
    def resctrl_root(self):
        """The emulated resctrl, outside the namespace.

        Inside, libvirt sees the same mount at ``/sys/fs/resctrl``.
        """
        return self.paths.resctrl

    @property
    def kernel_release_file(self):
        """The emulated kernel's release (``[rdt] kernel_release_file``)."""
        return self.paths.osrelease

    @property
    def control(self):
        """A client of the emulator's control socket."""
        return control.ControlClient(self.paths.control)

    def enter_command(self):
        """Shell command that enters the sandbox's mount namespace."""
        return 'nsenter --target %d --mount' % self.pid

    def pids(self):
        """Pids of every process of the sandbox (also after a crash)."""
        info = layout.read_ready(self.paths)
        return layout.namespace_pids(info['mntns'], info['id']) if info else []

    def running(self):
        """True if the namespace holder is alive and resctrl is mounted."""
        self.info = layout.read_ready(self.paths)
        return bool(self.info and self.info['pid'] in self.pids() and
                    emulator.is_mounted(self.paths.resctrl))

    def _require_running(self):
        if not self.running():
            raise SandboxError('the sandbox in %s is not running' %
                               self.paths.base)

    # Life cycle ------------------------------------------------------------

    def start(self, timeout=180.0):
        """Start the sandbox; clean up what a crashed run left first."""
        reasons = missing_prerequisites()
        if reasons:
            raise SandboxError('cannot start a sandbox: ' +
                               '; '.join(reasons))
        if self.running():
            raise SandboxError('a sandbox is already running in %s (pid %d)'
                               % (self.paths.base, self.pid))
        self.cleanup()
        for sub in ('ns', 'private', 'log'):
            shutil.rmtree(os.path.join(self.paths.base, sub),
                          ignore_errors=True)
        os.makedirs(self.paths.resctrl, exist_ok=True)
        # Mounted here, in the host's namespace, so that users other than
        # root (nova-compute under DevStack) can read it too; the namespace
        # binds it on /sys/fs/resctrl for libvirt.
        try:
            handle = emulator.mount(self.paths.resctrl, self.profile,
                                    kernel=self.kernel,
                                    cmdline=self.cmdline,
                                    from_tree=self.from_tree,
                                    control_socket=self.paths.control,
                                    log_path=self.paths.log('emulator.log'),
                                    mba_effect=self.mba_effect,
                                    osrelease=self.paths.osrelease)
        except emulator.EmulatorError as e:
            raise SandboxError('the emulated resctrl did not start: %s' % e)
        with open(self.paths.emulator_pid, 'w') as f:
            f.write('%d\n' % handle.pid)
        cmd = ['unshare', '--mount', '--propagation', 'private'] + (
            ['--uts'] if self.hostname else []) + [
            sys.executable, '-m', 'rdt_virt.sandbox.namespace',
            '--dir', self.paths.base, '--profile', self.profile,
            '--resctrl', self.paths.resctrl]
        if self.hostname:
            cmd += ['--hostname', self.hostname]
        if self.listen:
            cmd += ['--listen', self.listen]
        if self.from_tree:
            cmd += ['--from-tree', self.from_tree]
        if self.paths.cache_dir:
            os.makedirs(self.paths.cache_dir, exist_ok=True)
            cmd += ['--cache-dir', self.paths.cache_dir]
        log_path = self.paths.log('namespace.log')
        with open(log_path, 'ab') as log:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.running():
            if proc.poll() is not None:
                self.stop()
                raise SandboxError('the sandbox failed to start:\n%s' %
                                   _tail(log_path))
            if time.monotonic() > deadline:
                self.stop()
                raise SandboxError('the sandbox did not start within %ss:\n'
                                   '%s' % (timeout, _tail(log_path)))
            time.sleep(0.1)
        return self

    def stop(self, timeout=60.0):
        """Destroy the guests, stop the daemons and the emulator."""
        self.info = layout.read_ready(self.paths)
        if self.info and layout.alive(self.info['pid']):
            layout.terminate([self.info['pid']], timeout=timeout)
        self.cleanup()

    def cleanup(self):
        """Kill whatever is left of a previous run and unmount resctrl."""
        info = layout.read_ready(self.paths)
        if info:
            layout.terminate(
                layout.namespace_pids(info.get('mntns'), info.get('id')))
            os.unlink(self.paths.ready)
        self.info = None
        if emulator.is_mounted(self.paths.resctrl):
            emulator.unmount(self.paths.resctrl, lazy=True)
        pid = _emulator_pid(self.paths.emulator_pid)
        if pid:
            layout.terminate([pid])
            os.unlink(self.paths.emulator_pid)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _is_loopback(address):
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def _emulator_pid(path):
    """The pid in ``path`` if it is still an emulator process, else None."""
    try:
        with open(path) as f:
            pid = int(f.read())
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            cmdline = f.read()
    except (OSError, ValueError):
        return None
    # Pids are reused: only a process serving the emulator counts.
    return pid if b'rdt_virt.cmd.emulator' in cmdline else None


def _tail(path, lines=30):
    try:
        with open(path, errors='replace') as f:
            return ''.join(f.readlines()[-lines:])
    except OSError:
        return ''
