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

"""The agent as a process of its own, driven one step at a time.

``python -m tests.functional.agent.chaosagent SETTINGS_JSON`` builds the
real agent (reconciliation, executor, privileged entrypoints in-process,
sampler, state file) over a domain source that reads a JSON file, then
obeys JSON commands on stdin, one answer line each:

``{"op": "tick"}``                 one full reconciliation
``{"op": "event", "kind", "uuid"}`` one libvirt event (fast path, cleanup)
``{"op": "sample"}``               read counters, publish the state file
``{"op": "kill_after", "calls"}``  SIGKILL this process right after the
                                   N-th privileged call from now

Running the agent in its own process is what lets a test kill it in the
middle of applying a plan, as the kernel's OOM killer or an operator's
``kill -9`` would, and start a fresh one over what it left.

The domain file stands in for libvirtd: ``{"up": bool, "domains": {uuid:
instance}}``. While ``up`` is false the source is disconnected, as after
libvirtd went away: listing fails and the agent must reconnect.
"""

import json
import logging
import os
import signal
import sys
import time
import warnings

from rdt_virt.agent import domains
from rdt_virt.agent import model
from rdt_virt.cmd import agent as agent_cmd
from rdt_virt import concurrency
from rdt_virt import conf as rdt_conf
from rdt_virt import exception
from rdt_virt import privsep
from rdt_virt.privsep import resctrl as priv

CONF = rdt_conf.CONF


def instance_to_json(inst):
    bw = inst.bandwidth
    return {'uuid': inst.uuid, 'name': inst.name,
            'domain_id': inst.domain_id, 'monitor': inst.monitor,
            'bandwidth': None if bw is None else [
                bw.unit, bw.value, bw.requested, bw.group]}


def instance_from_json(doc):
    bw = doc.get('bandwidth')
    policy = {}
    if bw is not None:
        bw = model.BandwidthPolicy(*bw)
        policy = {'mem_bw': bw.requested}
    return model.Instance(doc['uuid'], doc['name'], doc['domain_id'],
                          bandwidth=bw, monitor=doc['monitor'],
                          policy=policy)


def write_domains(path, instances, up=True):
    """Atomically replace the domain file (the test's libvirtd)."""
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump({'up': up, 'domains': {
            u: instance_to_json(i) for u, i in instances.items()}}, f)
    os.replace(tmp, path)


class FileSource(object):
    """libvirt for the agent, read from the domain file."""

    def __init__(self, path):
        self.path = path
        self.events = concurrency.native('queue').Queue()
        self.connected = False

    def _load(self):
        with open(self.path) as f:
            doc = json.load(f)
        if not doc.get('up'):
            self.connected = False
            raise exception.RDTVirtException('libvirtd is not running')
        return {u: instance_from_json(d)
                for u, d in doc['domains'].items()}

    def connect(self):
        self._load()
        self.connected = True

    def instances(self):
        return self._load()

    def capabilities(self):
        # A host with no NUMA topology in libvirt's view: one pool each.
        self._load()
        return '<capabilities><host/></capabilities>'

    def instance(self, uuid):
        try:
            return self._load().get(uuid)
        except exception.RDTVirtException:
            return None


class KillingAPI(object):
    """The privileged API, with a SIGKILL armed after N calls."""

    def __init__(self, api=priv):
        self.api = api
        self.remaining = None

    def __getattr__(self, name):
        func = getattr(self.api, name)

        def call(*args, **kwargs):
            result = func(*args, **kwargs)
            if self.remaining is not None:
                self.remaining -= 1
                if self.remaining <= 0:
                    os.kill(os.getpid(), signal.SIGKILL)
            return result
        return call


def main(argv=None):
    settings = json.loads((argv or sys.argv[1:])[0])
    warnings.simplefilter('ignore')
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format='agent %(levelname)s %(message)s')
    CONF([], project='rdt-virt')
    for group, opts in settings['conf'].items():
        for name, value in opts.items():
            CONF.set_override(name, value, group)
    privsep.sys_admin_pctxt.set_client_mode(False)
    api = KillingAPI()
    agent = agent_cmd.build_agent(CONF, source=FileSource(
        settings['domains']), api=api)
    out = sys.stdout
    out.write(json.dumps({'ready': os.getpid()}) + '\n')
    out.flush()
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd['op']
        errors = agent.totals['errors']
        answer = {'op': op}
        if op == 'tick':
            stats = agent._safe(agent.tick)
            if stats is not None:
                answer.update(actions=stats.actions, writes=stats.writes,
                              skipped=stats.skipped)
        elif op == 'event':
            agent._safe(agent.handle, domains.Event(
                cmd['kind'], cmd['uuid'], time.monotonic()))
            if agent.full_requested:
                agent._safe(agent.tick)
        elif op == 'sample':
            agent._safe(agent.sample)
        elif op == 'kill_after':
            api.remaining = int(cmd['calls'])
        answer['errors'] = agent.totals['errors'] - errors
        out.write(json.dumps(answer) + '\n')
        out.flush()
    return 0


if __name__ == '__main__':
    sys.exit(main())
