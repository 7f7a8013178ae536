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

"""The test cloud's SSH: Nova's own commands against a real sshd.

The files :mod:`rdt_virt.cloud.ssh` writes, used as the compute hosts use
them: an sshd on a loopback address of its own, and the commands Nova's
libvirt driver runs for a cold migration (``ssh -o BatchMode=yes <dest>
mkdir -p``, ``scp -r``). Needs root (sshd's privilege separation) and
OpenSSH's server, which bindep's cloud profile installs for CI.
"""

import os
import shutil
import subprocess
import tempfile
import time

import testtools

from rdt_virt.cloud import process
from rdt_virt.cloud import ssh

ADDRESS = '127.0.0.9'


class TestSSH(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0 or not os.access(ssh.SSHD, os.X_OK):
            self.skipTest('needs root and %s (bindep cloud profile)' %
                          ssh.SSHD)
        # Below /tmp, as the cloud tests' cloud is below /var/tmp.
        self.tmp = tempfile.mkdtemp(prefix='rdt-virt-ssh-')
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.keys = ssh.Keys(os.path.join(self.tmp, 'ssh'))
        self.port = process.free_port(ADDRESS)
        self.hosts = {'compute9': (ADDRESS, self.port)}
        self.keys.create(self.hosts)
        self.keys.write(self.hosts)
        os.makedirs('/run/sshd', mode=0o755, exist_ok=True)

    def _sshd(self):
        config = self.keys.sshd_config('compute9')
        check = subprocess.run([ssh.SSHD, '-t', '-f', config],
                               capture_output=True, text=True)
        self.assertEqual(0, check.returncode, check.stderr)
        proc = subprocess.Popen([ssh.SSHD, '-D', '-e', '-f', config],
                                stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        deadline = time.monotonic() + 10
        while not process.port_open(ADDRESS, self.port):
            self.assertIsNone(proc.poll(), 'sshd exited')
            self.assertLess(time.monotonic(), deadline, 'sshd not listening')
            time.sleep(0.05)

    def _client(self, *argv, config=None):
        # -F: the cloud's ~/.ssh/config, which the compute hosts get
        # through a bind mount.
        config = config or os.path.join(self.keys.client_dir, 'config')
        return subprocess.run([argv[0], '-F', config] + list(argv[1:]),
                              capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)

    def test_nova_commands_reach_the_host(self):
        self._sshd()
        dest = os.path.join(self.tmp, 'instances', 'uuid')
        out = self._client('ssh', '-o', 'BatchMode=yes', ADDRESS, 'mkdir',
                           '-p', dest)
        self.assertEqual(0, out.returncode, out.stderr)
        self.assertTrue(os.path.isdir(dest))
        disk = os.path.join(self.tmp, 'disk')
        with open(disk, 'wb') as f:
            f.write(os.urandom(65536))
        out = self._client('scp', '-r', disk, '%s:%s/' % (ADDRESS, dest))
        self.assertEqual(0, out.returncode, out.stderr)
        copy = os.path.join(dest, 'disk')
        with open(disk, 'rb') as a, open(copy, 'rb') as b:
            self.assertEqual(a.read(), b.read())

    def test_another_key_is_refused(self):
        self._sshd()
        other = ssh.Keys(os.path.join(self.tmp, 'other'))
        other.create({})
        shutil.copy(os.path.join(self.keys.client_dir, 'known_hosts'),
                    other.client_dir)
        with open(os.path.join(other.client_dir, 'config'), 'w') as f:
            f.write(ssh.client_config(self.hosts, other.client_dir))
        out = self._client('ssh', ADDRESS, 'true', config=os.path.join(
            other.client_dir, 'config'))
        self.assertEqual(255, out.returncode)
        self.assertIn('Permission denied', out.stderr)

    def test_an_unknown_host_key_is_refused(self):
        self._sshd()
        with open(os.path.join(self.keys.client_dir, 'known_hosts'),
                  'w') as f:
            f.write('')
        out = self._client('ssh', ADDRESS, 'true')
        self.assertEqual(255, out.returncode)
        self.assertIn('Host key verification failed', out.stderr)

    def test_configs_name_each_host_and_only_loopback(self):
        with open(self.keys.sshd_config('compute9')) as f:
            server = f.read()
        self.assertIn('ListenAddress %s:%d\n' % (ADDRESS, self.port), server)
        self.assertIn('PasswordAuthentication no\n', server)
        with open(os.path.join(self.keys.client_dir, 'config')) as f:
            client = f.read()
        self.assertIn('Host %s\n    Port %d\n' % (ADDRESS, self.port),
                      client)
        self.assertIn('StrictHostKeyChecking yes', client)
