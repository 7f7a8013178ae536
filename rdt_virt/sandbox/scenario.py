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

"""The reference scenario on an emulated RDT host.

One protected guest and seven noisy neighbours share the emulated reference
host (two-socket Xeon Gold 6252: 8 MBA CLOSIDs, CMT and MBM). The scenario
runs three times over the same host, with rdt-virt-agent monitoring every
guest:

1. no policy: every guest in the default group;
2. the noisy guests' flavor gets ``hw:mem_bw=10`` with the per-instance
   strategy: libvirt gives each its own group (``<memorytune>``), which
   takes all 7 MBA CLOSIDs left on this host;
3. the same with the shared strategy: rdt-virt-agent puts all seven into
   one group, ``rdtvirt-mb10``: one CLOSID.

Between phases it prints the resctrl groups (``rdt-virt groups``) and the
per-guest table (``rdt-virt top``), and at the end the memory bandwidth of
every guest side by side. The counters are the emulator's: memory traffic
grows with each guest's CPU time, scaled by its group's MBA throttle. They
show what rdt-virt configures and reports, not how real hardware behaves
under contention.
"""

import json
import os
import subprocess
import sys
import time
import uuid as uuid_mod

from rdt_virt.agent import state as state_mod
from rdt_virt.cmd import cli
from rdt_virt.libvirt import capabilities
from rdt_virt.libvirt import elements
from rdt_virt.policy import extra_specs
from rdt_virt.policy import fit
from rdt_virt.sandbox import guest
from rdt_virt.sandbox import launcher

NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
NOISY = ['noisy-%d' % i for i in range(1, 8)]
PROTECTED = 'protected'
NOISY_SPECS = {'hw:mem_bw': '10'}

AGENT_CONF = '''[DEFAULT]
debug = false
log_file = {dir}/agent.log

[rdt]
resctrl_root = {resctrl}
mb_strategy = {strategy}
default_group_l3_ways = 2
monitoring = true
state_file = {dir}/state.json

[rdt_agent]
libvirt_uri = {uri}
qemu_pid_dir = {qemu_pid_dir}
tick_interval = 2
sample_interval = {sample}
prometheus_port = 0
'''


def nova_metadata(name, flavor, specs):
    """A ``<nova:instance>`` element: the agent manages Nova's domains."""
    extra = ''.join('<nova:extraSpec name="%s">%s</nova:extraSpec>' % kv
                    for kv in sorted(specs.items()))
    return ('<nova:instance xmlns:nova="%s"><nova:name>%s</nova:name>'
            '<nova:flavor name="%s"><nova:vcpus>1</nova:vcpus>'
            '<nova:extraSpecs>%s</nova:extraSpecs></nova:flavor>'
            '</nova:instance>' % (NOVA_NS, name, flavor, extra))


class Scenario(object):
    """Runs the phases; ``out`` gets the report."""

    def __init__(self, directory, out=sys.stdout, settle=8.0, sample=2.0):
        self.dir = directory
        self.out = out
        self.settle = settle
        self.sample = sample
        self.sandbox = launcher.Sandbox(
            os.path.join(directory, 'sandbox'), 'reference',
            cache_dir='/var/cache/rdt-virt/sandbox-libvirt')
        self.agent = None
        self.uuids = {}
        # Control groups other than the default one, after phases 2 and 3.
        self.groups = {}

    # Plumbing ----------------------------------------------------------

    def say(self, text=''):
        self.out.write(text + '\n')
        self.out.flush()

    def start(self):
        import libvirt

        self.sandbox.start()
        self.conn = libvirt.open(self.sandbox.uri)
        self.caps = capabilities.parse(
            self.conn.getCapabilities()).capabilities
        self.image = guest.write_image(os.path.join(self.dir, 'burn.img'))

    def stop(self):
        self.stop_agent()
        self.sandbox.stop()

    def start_agent(self, strategy):
        self.stop_agent()
        conf = os.path.join(self.dir, 'agent.conf')
        with open(conf, 'w') as f:
            f.write(AGENT_CONF.format(
                dir=self.dir, resctrl=self.sandbox.resctrl_root,
                strategy=strategy, uri=self.sandbox.uri,
                qemu_pid_dir=self.sandbox.paths.private('/run/libvirt') +
                '/qemu', sample=self.sample))
        self.agent = subprocess.Popen(
            [sys.executable, '-m', 'rdt_virt.cmd.agent', '--config-file',
             conf], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(self.dir, 'agent.err'), 'ab'))
        self.strategy = strategy

    def stop_agent(self):
        if self.agent is not None:
            self.agent.terminate()
            self.agent.wait(30)
            self.agent = None

    def cli(self, *args):
        return subprocess.run(
            [sys.executable, '-W', 'ignore', '-m', 'rdt_virt.cmd.cli',
             '--resctrl-root', self.sandbox.resctrl_root, '--state-file',
             os.path.join(self.dir, 'state.json')] + list(args),
            check=True, capture_output=True, text=True).stdout

    def boot(self, name, specs):
        uid = self.uuids.setdefault(name, str(uuid_mod.uuid4()))
        base = guest.domain_xml(
            name, self.image, vcpus=1, uuid=uid,
            metadata=nova_metadata(name, 'm1.noisy' if specs else 'm1.small',
                                   specs))
        policy = extra_specs.from_extra_specs(specs)
        plan = fit.fit(policy, self.caps, self.strategy)
        xml = elements.insert(base, elements.elements(policy, plan, 1))
        return self.conn.createXML(xml)

    def destroy(self, names):
        for name in names:
            self.conn.lookupByName(name).destroy()

    def wait_for_rates(self, names):
        """Wait until the agent published fresh rates for ``names``."""
        deadline = time.monotonic() + 60
        time.sleep(self.settle)
        while time.monotonic() < deadline:
            doc = state_mod.read(os.path.join(self.dir, 'state.json'))
            if doc:
                rates = {i.get('name'): i.get('mbm_total_bps')
                         for i in doc.get('instances', {}).values()}
                if all(rates.get(n) is not None for n in names):
                    return doc
            time.sleep(0.5)
        raise RuntimeError('rdt-virt-agent published no rates for %s; see '
                           '%s/agent.log' % (', '.join(names), self.dir))

    def report(self, title):
        names = [PROTECTED] + NOISY
        doc = self.wait_for_rates(names)
        self.say('== %s ==' % title)
        self.say()
        self.say('resctrl groups (rdt-virt groups):')
        self.say(_indent(self.cli('groups')))
        self.say('per guest, emulated counters (rdt-virt top):')
        self.say(_indent(cli.top_table(doc)))
        return {i['name']: i for i in doc['instances'].values()
                if i.get('name') in names}

    # Phases --------------------------------------------------------------

    def run(self):
        self.say('rdt-virt reference scenario on the emulated reference '
                 'host')
        self.say('(2-socket Xeon Gold 6252 profile: L3 CAT 7ff, MBA 10% '
                 'steps with 8 CLOSIDs, CMT+MBM).')
        self.say('All counters are EMULATED: memory traffic follows each '
                 'guest\'s CPU time,')
        self.say('scaled by its group\'s MBA throttle; this shows what '
                 'rdt-virt configures and')
        self.say('reports, not real contention.')
        self.say()
        self.start()
        try:
            results = {}
            self.start_agent('per-instance')
            self.boot(PROTECTED, {})
            for name in NOISY:
                self.boot(name, {})
            results['none'] = self.report(
                'Phase 1: no policy (8 burning guests, default group)')

            self.destroy(NOISY)
            for name in NOISY:
                self.boot(name, NOISY_SPECS)
            results['per-instance'] = self.report(
                'Phase 2: noisy guests at hw:mem_bw=10, per-instance '
                'strategy (libvirt <memorytune>)')
            self.groups['per-instance'] = self.control_groups()

            self.destroy(NOISY)
            self.start_agent('shared')
            for name in NOISY:
                self.boot(name, NOISY_SPECS)
            results['shared'] = self.report(
                'Phase 3: noisy guests at hw:mem_bw=10, shared strategy '
                '(rdt-virt-agent group rdtvirt-mb10)')
            self.groups['shared'] = self.control_groups()
            self.summary(results, self.groups['per-instance'],
                         self.groups['shared'])
        finally:
            self.stop()
        return results

    def control_groups(self):
        rows = json.loads(self.cli('groups', '--json'))
        return sorted(r['group'] for r in rows
                      if r['kind'] == 'control' and r['owner'] != 'default')

    def summary(self, results, per_instance, shared):
        self.say('== Summary: memory bandwidth per guest (emulated MB/s) ==')
        self.say()
        rows = []
        for name in [PROTECTED] + NOISY:
            values = [results[p][name].get('mbm_total_bps') or 0.0
                      for p in ('none', 'per-instance', 'shared')]
            rows.append([name, NOISY_SPECS['hw:mem_bw'] + '%'
                         if name != PROTECTED else '-'] +
                        ['%.1f' % (v / 1e6) for v in values] +
                        ['%.2fx' % (values[2] / values[0]
                                    if values[0] else 0)])
        self.say(_indent(_table(
            ['GUEST', 'MB THROTTLE', 'NO POLICY', 'PER-INSTANCE', 'SHARED',
             'SHARED/NONE'], rows)))
        self.say('CLOSIDs taken by the noisy guests, per-instance strategy: '
                 '%d (%s)' % (len(per_instance), ', '.join(per_instance)))
        self.say('CLOSIDs taken by the noisy guests, shared strategy:       '
                 '%d (%s)' % (len(shared), ', '.join(shared)))


def _table(headers, rows):
    widths = [max(len(str(r[i])) for r in [headers] + rows)
              for i in range(len(headers))]
    return '\n'.join('  '.join(str(c).ljust(w) for c, w in zip(r, widths))
                     .rstrip() for r in [headers] + rows) + '\n'


def _indent(text):
    return ''.join('  ' + line + '\n' for line in text.splitlines())
