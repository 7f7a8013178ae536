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

"""SSH between the compute hosts, for Nova's remote file operations.

A cold migration or a resize to another host makes the libvirt driver run
``ssh -o BatchMode=yes <dest> mkdir -p ...``, ``touch`` and ``rm`` on the
destination and copy the disks with ``scp`` (``[libvirt]
remote_filesystem_transport = ssh``, the default). Operators give
nova-compute's user a key that every compute host accepts; the test cloud
does the same, on loopback only:

* one sshd per compute host, listening on that host's own address
  (:data:`~rdt_virt.cloud.services.ADDRESSES`) and on a port of the cloud's
  own, in the host's sandbox mount namespace, where its instance directory
  is bound on ``instances_path``: what Nova writes over SSH lands where the
  destination's nova-compute and QEMU look for it;
* one client key, accepted by every host's sshd only (its own
  ``AuthorizedKeysFile``), and the hosts' keys in a known_hosts file of
  the cloud's own, checked strictly;
* the client's configuration as nova-compute's user's ``~/.ssh``, bound
  in each compute host's mount namespace only (see
  :meth:`rdt_virt.cloud.cloud.Cloud.in_sandbox`): the machine's own
  ``~/.ssh`` is neither read nor changed.

Everything lives under ``<cloud>/state/ssh`` and goes with ``down``.
"""

import os
import pwd
import subprocess

SSHD = '/usr/sbin/sshd'
KEY = 'id_ed25519'


def home():
    """The home directory of the user nova-compute runs as (this one)."""
    return pwd.getpwuid(os.getuid()).pw_dir


class Keys(object):
    """The cloud's SSH files under ``base`` (``<cloud>/state/ssh``)."""

    def __init__(self, base):
        self.base = base

    def path(self, *parts):
        return os.path.join(self.base, *parts)

    @property
    def client_dir(self):
        """What nova-compute's user sees as ``~/.ssh`` on a compute host."""
        return self.path('client')

    def host_key(self, host):
        return self.path('hosts', host, 'ssh_host_ed25519_key')

    def sshd_config(self, host):
        return self.path('hosts', host, 'sshd_config')

    def create(self, hosts):
        """Make the client key and each host's key (once)."""
        os.makedirs(self.client_dir, mode=0o700, exist_ok=True)
        os.chmod(self.base, 0o700)
        _keygen(os.path.join(self.client_dir, KEY), 'rdt-virt test cloud')
        for host in hosts:
            os.makedirs(os.path.dirname(self.host_key(host)), mode=0o700,
                        exist_ok=True)
            _keygen(self.host_key(host), host)

    def write(self, hosts):
        """Write every host's sshd_config and the client's configuration.

        ``hosts``: {host name: (address, port)}.
        """
        client = os.path.join(self.client_dir, KEY)
        with open(client + '.pub') as f:
            public = f.read().strip()
        with open(self.path('authorized_keys'), 'w') as f:
            f.write(public + '\n')
        known = []
        for host, (address, port) in sorted(hosts.items()):
            with open(self.host_key(host) + '.pub') as f:
                kind, key = f.read().split()[:2]
            known.append('[%s]:%d %s %s' % (address, port, kind, key))
            with open(self.sshd_config(host), 'w') as f:
                f.write(sshd_config(address, port, self.host_key(host),
                                    self.path('authorized_keys')))
        with open(os.path.join(self.client_dir, 'known_hosts'), 'w') as f:
            f.write('\n'.join(known) + '\n')
        with open(os.path.join(self.client_dir, 'config'), 'w') as f:
            f.write(client_config(hosts, self.client_dir))
        for name in os.listdir(self.client_dir):
            os.chmod(os.path.join(self.client_dir, name), 0o600)


def _keygen(path, comment):
    if os.path.exists(path):
        return
    subprocess.run(['ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C',
                    comment, '-f', path], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def sshd_config(address, port, host_key, authorized_keys):
    """An sshd that takes the cloud's key, and nothing else, on loopback."""
    return '\n'.join([
        'ListenAddress %s:%d' % (address, port),
        'HostKey %s' % host_key,
        'AuthorizedKeysFile %s' % authorized_keys,
        'PermitRootLogin prohibit-password',
        'PubkeyAuthentication yes',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        # The cloud's directory may be below one that everyone may write
        # to (the cloud tests' is in /var/tmp), which StrictModes refuses;
        # the key files are the cloud's own, in a directory only root
        # can enter.
        'StrictModes no',
        'PidFile none',
        # scp speaks SFTP since OpenSSH 9.0.
        'Subsystem sftp internal-sftp',
        'PrintMotd no',
        '']) + '\n'


def client_config(hosts, client_dir):
    """~/.ssh/config: each compute host's port, the cloud's key, strict."""
    lines = []
    for _host, (address, port) in sorted(hosts.items()):
        lines += ['Host %s' % address, '    Port %d' % port]
    known = os.path.join(client_dir, 'known_hosts')
    lines += ['Host *',
              '    IdentityFile %s' % os.path.join(client_dir, KEY),
              '    IdentitiesOnly yes',
              '    UserKnownHostsFile %s' % known,
              '    GlobalKnownHostsFile /dev/null',
              '    StrictHostKeyChecking yes',
              '    BatchMode yes', '']
    return '\n'.join(lines)
