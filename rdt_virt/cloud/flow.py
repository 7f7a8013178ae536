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

"""The operator's flow on the cloud, typed as a user types it.

Every step is an ``openstack`` (python-openstackclient with osc-placement),
``gnocchi`` or ``rdt-virt`` command, printed with its output; each step
checks what a user would look at (server states, Placement usages and
traits, resctrl groups and their tasks, Gnocchi measures) and the flow
stops at the first that is wrong.
"""

import json
import os
import shlex
import subprocess
import time

from rdt_virt.cloud import services
from rdt_virt.sandbox import guest

NOISY = 7


class FlowError(Exception):
    pass


class Flow(object):

    def __init__(self, cloud, out=print):
        self.cloud = cloud
        self.out = out
        self.env = cloud.env(**cloud.openrc())
        self.work = cloud.layout.path('flow')
        os.makedirs(self.work, exist_ok=True)

    # Commands ------------------------------------------------------------

    def sh(self, *argv, check=True, show=True, parse=False):
        """Run a command as typed; print it and its output."""
        argv = [str(a) for a in argv]
        if parse:
            argv += ['-f', 'json']
        if show:
            self.out('$ ' + ' '.join(shlex.quote(a) for a in argv))
        proc = subprocess.run(argv, env=self.env, capture_output=True,
                              text=True)
        text = proc.stdout + proc.stderr
        if show and not parse:
            self.out(text.rstrip())
        if check and proc.returncode:
            raise FlowError('%s failed (exit %d):\n%s' % (
                ' '.join(argv), proc.returncode, text))
        if parse:
            return json.loads(proc.stdout) if proc.stdout.strip() else None
        return proc.returncode, text

    def os(self, *args, **kw):
        return self.sh(self.cloud.layout.tool('openstack'), *args, **kw)

    def table(self, *args):
        """An ``openstack`` listing, shown as the user sees it."""
        return self.os(*args)[1]

    def expect(self, ok, message):
        if not ok:
            raise FlowError(message)
        self.out('  ok: ' + message)

    def wait(self, what, check, timeout=300, interval=3):
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise FlowError('timed out waiting for ' + what)
            time.sleep(interval)

    # Steps ---------------------------------------------------------------

    def run(self):
        self.step('Flavors and images', self.flavors_and_images)
        self.step('Bad input', self.bad_input)
        self.step('Boot one protected and %d noisy servers' % NOISY,
                  self.boot)
        self.step('Where the servers went, and why', self.placement)
        self.step('resctrl on each host', self.resctrl)
        self.step('Telemetry in Gnocchi', self.gnocchi)
        self.step('Resize, rebuild, live migration', self.lifecycle)
        self.step('Delete all: back to zero', self.delete_all)

    def step(self, title, fn):
        self.out('\n== %s ==' % title)
        t = time.monotonic()
        fn()
        self.out('   (%.0f s)' % (time.monotonic() - t))

    def flavors_and_images(self):
        self.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
                '--property', 'hw:cache_l3=2048', 'rdt.protected')
        self.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
                '--property', 'hw:mem_bw=10', 'rdt.noisy')
        self.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
                '--property', 'hw:mem_bw=20', 'rdt.noisy20')
        for program in ('burn', 'idle'):
            path = guest.write_image(os.path.join(self.work, program +
                                                  '.img'), program)
            name = 'rdt-' + program
            image = self.os('image', 'create', '--disk-format', 'raw',
                            '--container-format', 'bare', '--public', name,
                            parse=True)
            # Glance under uWSGI: openstackclient's upload is refused
            # (415) and glanceclient's, though stored, is answered with a
            # reset connection and a retry's 409; the image's status
            # says whether the data arrived.
            self.sh(self.cloud.layout.tool('glance'), 'image-upload',
                    '--file', path, image['id'], check=False)
            self.wait(name + ' active', lambda n=name: self.os(
                'image', 'show', n, parse=True, show=False)['status'] ==
                'active', timeout=120)
            self.os('image', 'show', name, '-c', 'name', '-c', 'status',
                    '-c', 'size')

    def bad_input(self):
        # Nova validates extra specs only from microversion 2.86, and
        # openstackclient sends flavor changes at an older one unless told
        # (OS_COMPUTE_API_VERSION=2.latest is not enough): without the
        # option hw:mem_bw=0 is stored.
        rc, text = self.os('--os-compute-api-version', '2.86', 'flavor',
                           'set', '--property', 'hw:mem_bw=0', 'rdt.noisy',
                           check=False)
        self.expect(rc != 0 and '400' in text and
                    'not a valid value for hw:mem_bw' in text,
                    'hw:mem_bw=0 is refused with HTTP 400 and the reason')
        flavor = self.os('flavor', 'show', 'rdt.noisy', parse=True,
                         show=False)
        self.expect(flavor['properties'].get('hw:mem_bw') == '10',
                    'the flavor keeps hw:mem_bw=10')
        # More dedicated L3 than any host has: no host can serve it.
        self.os('flavor', 'create', '--vcpus', 1, '--ram', 64, '--disk', 1,
                '--property', 'hw:cache_l3=1048576', 'rdt.huge')
        self.os('server', 'create', '--flavor', 'rdt.huge', '--image',
                'rdt-idle', '--nic', 'none', 'too-big', check=False)
        server = self.wait('too-big to fail', lambda: self._state(
            'too-big', ('ERROR',)), timeout=180)
        self.os('server', 'show', 'too-big', '-c', 'status', '-c', 'fault')
        fault = json.dumps(server.get('fault') or {})
        self.expect('RDT' in fault,
                    'the fault names RDT: %s' % fault[:200])
        self.os('server', 'delete', '--wait', 'too-big')

    def _state(self, name, states):
        server = self.os('server', 'show', name, parse=True, show=False)
        if server and server['status'] in states:
            return server
        if server and server['status'] == 'ERROR':
            raise FlowError('%s went to ERROR: %s' % (name,
                                                      server.get('fault')))
        return None

    def boot(self):
        self.os('server', 'create', '--flavor', 'rdt.protected', '--image',
                'rdt-idle', '--nic', 'none', '--wait', 'protected')
        self.os('server', 'create', '--flavor', 'rdt.noisy', '--image',
                'rdt-burn', '--nic', 'none', '--min', NOISY, '--max', NOISY,
                'noisy')
        names = ['noisy-%d' % i for i in range(1, NOISY + 1)]
        for name in names:
            self.wait(name + ' ACTIVE',
                      lambda n=name: self._state(n, ('ACTIVE',)))
        self.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
                   '-c', 'Flavor Name', '-c', 'Host')

    def placement(self):
        rps = self.os('resource', 'provider', 'list', parse=True)
        self.table('resource', 'provider', 'list')
        for rp in rps:
            self.os('resource', 'provider', 'trait', 'list', rp['uuid'],
                    '-c', 'name')
            self.os('resource', 'provider', 'usage', 'show', rp['uuid'])

    def resctrl(self):
        for host, _ in services.COMPUTES:
            root = self.cloud.host_dir(host, 'sandbox', 'resctrl')
            self.out('-- %s --' % host)
            self.sh(self.cloud.layout.tool('rdt-virt'), '--resctrl-root',
                    root, 'groups')
            self.sh(self.cloud.layout.tool('rdt-virt'), '--state-file',
                    self.cloud.host_dir(host, 'host-state.json'), 'top',
                    '--once')

    def gnocchi(self):
        server = self.os('server', 'show', 'noisy-1', parse=True,
                         show=False)
        gn = self.cloud.layout.tool('gnocchi')

        def measures():
            rc, text = self.sh(gn, 'measures', 'show', '--resource-id',
                               server['id'], '--refresh',
                               'memory.bandwidth.total', check=False,
                               show=False)
            return text if rc == 0 and 'B/s' not in text and \
                text.count('|') > 8 else None
        self.wait('measures of noisy-1 in Gnocchi', measures, timeout=300,
                  interval=10)
        for meter in ('memory.bandwidth.total', 'memory.bandwidth.local',
                      'cpu_l3_cache'):
            self.sh(gn, 'measures', 'show', '--resource-id', server['id'],
                    '--refresh', meter)

    def lifecycle(self):
        self.os('server', 'resize', '--flavor', 'rdt.noisy20', '--wait',
                'noisy-2')
        self.os('server', 'resize', 'confirm', 'noisy-2')
        self.os('server', 'rebuild', '--image', 'rdt-idle', '--wait',
                'noisy-3')
        server = self.os('server', 'show', 'noisy-4', parse=True,
                         show=False)
        source = server['OS-EXT-SRV-ATTR:host']
        rc, text = self.os('server', 'migrate', '--live-migration',
                           '--wait', 'noisy-4', check=False)
        after = self.os('server', 'show', 'noisy-4', parse=True,
                        show=False)
        self.out('  live migration: %s -> %s (%s)' % (
            source, after['OS-EXT-SRV-ATTR:host'], after['status']))
        self.table('server', 'list', '--long', '-c', 'Name', '-c', 'Status',
                   '-c', 'Flavor Name', '-c', 'Host')

    def delete_all(self):
        names = [s['Name'] for s in self.os('server', 'list', parse=True,
                                            show=False)]
        self.os('server', 'delete', '--wait', *names)
        for rp in self.os('resource', 'provider', 'list', parse=True,
                          show=False):
            usage = self.os('resource', 'provider', 'usage', 'show',
                            rp['uuid'], parse=True)
            self.expect(all(u['usage'] == 0 for u in usage),
                        'no usage left on %s' % rp['name'])
        for host, _ in services.COMPUTES:
            root = self.cloud.host_dir(host, 'sandbox', 'resctrl')
            left = [d for d in os.listdir(root)
                    if d.startswith(('qemu-', 'rdtvirt-'))]
            self.expect(not left, 'no instance group left on %s' % host)
