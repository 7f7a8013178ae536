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

"""The shipped sudoers rule, enforced by the real sudo.

Each test runs in a private mount namespace where ``/etc`` is an overlay
holding the shipped ``etc/sudoers.d/rdt-virt-agent`` as ``/etc/sudoers``,
an unprivileged ``rdt-virt`` user and ``/etc/rdt-virt/rdt-virt.conf``, and
``/usr/local/bin`` is a tmpfs with a ``privsep-helper`` (one that prints
its arguments, or the real one). The host's own files stay untouched. The
commands run as ``rdt-virt`` through ``sudo -n``, so a refusal is sudo's
policy refusing, not a missing password prompt being answered.
"""

import os
import shutil
import subprocess
import sys
import textwrap

import fixtures

from tests import base

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
RULE = os.path.join(REPO, 'etc', 'sudoers.d', 'rdt-virt-agent')
HELPER = '/usr/local/bin/privsep-helper'
CONF_FILE = '/etc/rdt-virt/rdt-virt.conf'
CONTEXT = 'rdt_virt.privsep.sys_admin_pctxt'
SOCK = '/tmp/tmpab_c1234/privsep.sock'
UID = 64123
GOOD = ['--config-file', CONF_FILE, '--privsep_context', CONTEXT,
        '--privsep_sock_path', SOCK]

# Sets up the namespace, then runs "$@" as rdt-virt.
SETUP = r'''
set -eu
work=$1 rule=$2 helper=$3 resctrl=$4; shift 4
mount -t tmpfs -o mode=0755 tmpfs "$work"
mkdir "$work/upper" "$work/wd"
mount -t overlay overlay \
    -o "lowerdir=/etc,upperdir=$work/upper,workdir=$work/wd" /etc
echo "rdt-virt:x:%(uid)d:%(uid)d::/nonexistent:/usr/sbin/nologin" \
    >> /etc/passwd
echo "rdt-virt:x:%(uid)d:" >> /etc/group
touch /etc/shadow
echo "rdt-virt:*:19000:0:99999:7:::" >> /etc/shadow
install -m 0440 -o root -g root "$rule" /etc/sudoers
rm -rf /etc/sudoers.d
mkdir -p /etc/rdt-virt
printf '[rdt]\nresctrl_root = %%s\n' "$resctrl" > /etc/rdt-virt/rdt-virt.conf
mount -t tmpfs -o mode=0755 tmpfs /usr/local/bin
install -m 0755 "$helper" %(helper)s
cd /
exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/nonexistent \
    PYTHONPATH="${EXTRA_PYTHONPATH:-}" \
    setpriv --reuid=%(uid)d --regid=%(uid)d --clear-groups -- "$@"
''' % {'uid': UID, 'helper': HELPER}

# Stands in for privsep-helper: shows who runs it with which arguments
# and environment.
ECHO_HELPER = textwrap.dedent('''\
    #!/bin/sh
    echo "HELPER uid=$(id -u) PYTHONPATH=${PYTHONPATH-unset}"
    for a; do echo "ARG $a"; done
    ''')

# What the agent does, as the agent's user: parse its configuration the
# way rdt-virt-agent does, then start the privileged daemon.
AGENT = textwrap.dedent('''\
    import sys, tempfile, subprocess
    from oslo_config import cfg
    from rdt_virt import privsep
    cfg.CONF(['--config-file', '/etc/rdt-virt/rdt-virt.conf'],
             project='rdt-virt')
    if sys.argv[1] == 'command':
        sock = tempfile.mkdtemp() + '/privsep.sock'
        cmd = privsep.sys_admin_pctxt.helper_command(sock)
        print('CMD', ' '.join(cmd))
        sys.exit(subprocess.call(cmd))
    from rdt_virt.privsep import resctrl
    try:
        resctrl.create_group('../etc')
    except ValueError as e:
        print('REFUSED', e)
    print('RESULT', resctrl.create_group('rdtvirt-mb10'))
    ''')


class TestSudoersRule(base.TestCase):

    def setUp(self):
        super().setUp()
        self.require(os.geteuid() == 0, 'needs root')
        for tool in ('sudo', 'unshare', 'setpriv', 'visudo'):
            self.require(shutil.which(tool), 'needs %s (bindep)' % tool)
        self.tmp = self.useFixture(fixtures.TempDir()).path
        os.chmod(self.tmp, 0o755)
        self.rule = os.environ.get('RDT_VIRT_SUDOERS_RULE', RULE)
        self.resctrl = os.path.join(self.tmp, 'resctrl')
        os.mkdir(self.resctrl, 0o700)

    def run_as_agent_user(self, argv, helper=ECHO_HELPER, env=None):
        """Run argv as rdt-virt in the namespace; (rc, output)."""
        helper_file = os.path.join(self.tmp, 'helper')
        with open(helper_file, 'w') as f:
            f.write(helper)
        work = os.path.join(self.tmp, 'ns')
        os.makedirs(work, exist_ok=True)
        cmd = ['unshare', '-m', '--propagation', 'private', 'bash', '-c',
               SETUP, 'setup', work, self.rule, helper_file,
               self.resctrl] + argv
        proc = subprocess.run(cmd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=120, env=dict(os.environ, **(env or {})))
        return proc.returncode, proc.stdout

    def assertRuns(self, args):
        rc, out = self.run_as_agent_user(['sudo', '-n', HELPER] + args)
        self.assertEqual(0, rc, out)
        self.assertIn('HELPER uid=0 ', out)
        self.assertEqual(['ARG %s' % a for a in args],
                         [line for line in out.splitlines()
                          if line.startswith('ARG ')])
        return out

    def assertRefused(self, argv):
        rc, out = self.run_as_agent_user(argv)
        self.assertNotEqual(0, rc, out)
        self.assertNotIn('HELPER', out)
        self.assertIn('sudo:', out)
        return out

    def test_rule_parses(self):
        subprocess.check_call(['visudo', '-c', '-q', '-f', self.rule])

    # What the agent needs --------------------------------------------------

    def test_exact_command_runs_as_root(self):
        self.assertRuns(GOOD)

    def test_command_oslo_privsep_builds_is_allowed(self):
        # The agent's own interpreter builds the helper command, with a
        # real temporary directory, as the agent's user.
        rc, out = self.run_as_agent_user(
            [sys.executable, '-c', AGENT, 'command'],
            env={'EXTRA_PYTHONPATH': REPO})
        self.assertEqual(0, rc, out)
        self.assertIn('HELPER uid=0 ', out)
        cmd = [line[4:] for line in out.splitlines()
               if line.startswith('CMD ')][0].split(' ')
        self.assertEqual(['sudo', 'privsep-helper'] + GOOD[:4], cmd[:6])
        self.assertEqual(cmd[2:], [line[4:] for line in out.splitlines()
                                   if line.startswith('ARG ')])

    def test_real_daemon_does_privileged_work(self):
        # The real privsep-helper: the agent's user starts the daemon
        # through sudo and has it create a group where only root can.
        real = os.path.join(os.path.dirname(sys.executable), 'privsep-helper')
        self.require(os.path.exists(real), 'no privsep-helper next to '
                     'the interpreter')
        helper = '#!/bin/sh\nexec %s "$@"\n' % real
        rc, out = self.run_as_agent_user(
            [sys.executable, '-c', AGENT, 'daemon'], helper=helper,
            env={'EXTRA_PYTHONPATH': REPO})
        self.assertEqual(0, rc, out)
        self.assertIn('REFUSED', out)
        self.assertIn("RESULT {'ok': True", out)
        made = os.path.join(self.resctrl, 'rdtvirt-mb10')
        self.assertTrue(os.path.isdir(made))
        self.assertEqual(0, os.stat(made).st_uid)

    def test_helper_gets_no_environment_from_the_user(self):
        rc, out = self.run_as_agent_user(
            ['sudo', '-n', HELPER] + GOOD,
            env={'EXTRA_PYTHONPATH': '/tmp/evil'})
        self.assertEqual(0, rc, out)
        self.assertIn('PYTHONPATH=unset', out)

    # Attacks -----------------------------------------------------------------

    def test_second_config_file_refused(self):
        # A file the user controls would move [rdt] resctrl_root.
        self.assertRefused(['sudo', '-n', HELPER] + GOOD +
                           ['--config-file', '/tmp/evil.conf'])
        self.assertRefused(['sudo', '-n', HELPER, '--config-file',
                            '/tmp/evil.conf'] + GOOD)

    def test_other_config_file_refused(self):
        args = list(GOOD)
        args[1] = '/tmp/evil.conf'
        self.assertRefused(['sudo', '-n', HELPER] + args)
        args[1] = '/etc/rdt-virt/../../tmp/evil.conf'
        self.assertRefused(['sudo', '-n', HELPER] + args)

    def test_config_dir_refused(self):
        self.assertRefused(['sudo', '-n', HELPER] + GOOD +
                           ['--config-dir', '/tmp/evil.d'])

    def test_other_privsep_context_refused(self):
        # Nova's and os-brick's contexts are full root.
        for ctx in ('nova.privsep.sys_admin_pctxt',
                    'os_brick.privileged.default',
                    'rdt_virt.privsep.sys_admin_pctxt.x'):
            args = list(GOOD)
            args[3] = ctx
            self.assertRefused(['sudo', '-n', HELPER] + args)
        self.assertRefused(['sudo', '-n', HELPER] + GOOD + [
            '--privsep_context', 'nova.privsep.sys_admin_pctxt'])

    def test_options_hidden_in_socket_path_refused(self):
        # sudo matches the arguments as one string: a wildcard for the
        # socket directory must not span spaces.
        for tail in (['/tmp/tmpa', '--config-file', '/tmp/x/privsep.sock'],
                     ['/tmp/tmpab d_123/privsep.sock'],
                     ['/tmp/tmpab_c1234/privsep.sock', '--debug'],
                     ['/tmp/tmpab_c12345/privsep.sock'],
                     ['/tmp/tmpab/c1234/privsep.sock'],
                     ['/home/rdt-virt/privsep.sock']):
            self.assertRefused(['sudo', '-n', HELPER] + GOOD[:5] + tail)

    def test_other_options_refused(self):
        for extra in (['--log-config-append', '/tmp/evil.ini'],
                      ['--config-f', '/tmp/evil.conf'],
                      ['--config-file=/tmp/evil.conf'],
                      ['--debug'], ['--help']):
            self.assertRefused(['sudo', '-n', HELPER] + GOOD + extra)
        self.assertRefused(['sudo', '-n', HELPER])

    def test_environment_injection_refused(self):
        # PYTHONPATH as root would import the user's code.
        self.assertRefused(['sudo', '-n', 'PYTHONPATH=/tmp/evil', HELPER] +
                           GOOD)
        self.assertRefused(['sudo', '-n', '--preserve-env=PYTHONPATH',
                            HELPER] + GOOD)
        self.assertRefused(['sudo', '-n', '-E', HELPER] + GOOD)

    def test_other_commands_refused(self):
        self.assertRefused(['sudo', '-n', '/bin/sh', '-c', 'id'])
        self.assertRefused(['sudo', '-n', '-u', 'nobody', HELPER] + GOOD)
        self.assertRefused(['sudo', '-n', '-s'])
