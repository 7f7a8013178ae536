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

"""Shared set-up of the agent benchmarks: an emulated host with an agent.

:class:`EmulatedHost` mounts the emulated resctrl (a real FUSE mount, as in
the functional tests), lays out fake QEMU processes whose vCPUs are real
threads of one helper process, and builds an agent with the privileged
entrypoints in-process and a fake libvirt. Needs root and /dev/fuse.
"""

import logging
import os
import shutil
import statistics
import sys
import tempfile
import uuid as uuid_mod
import warnings

warnings.simplefilter('ignore')
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))

from rdt_virt.agent import model  # noqa: E402
from rdt_virt.cmd import agent as agent_cmd  # noqa: E402
from rdt_virt import conf as rdt_conf  # noqa: E402
from rdt_virt.emulator import launcher  # noqa: E402
from rdt_virt import privsep  # noqa: E402
from tests.functional.agent import fakeqemu  # noqa: E402

CONF = rdt_conf.CONF
MUTATIONS = ('write', 'mkdir', 'rmdir', 'rename')


def copy_tree(env, dest, mon_data=False):
    """Copy the emulated resctrl of *env* to *dest*, an in-memory tree.

    The emulator answers every read through FUSE, a context switch to a
    Python daemon and back, which costs the agent far more CPU than the
    kernel's resctrl (kernfs) does. A copy on tmpfs shows the agent's own
    cost with in-memory reads. Without *mon_data*, only the default
    group's ``mon_data/mon_L3_XX`` directories are made (a tick does not
    read counters).
    """
    for top, dirs, files in os.walk(env.mount):
        if not mon_data:
            dirs[:] = [d for d in dirs if d != 'mon_data']
        target = os.path.join(dest, os.path.relpath(top, env.mount))
        os.makedirs(target, exist_ok=True)
        for name in files:
            # Read, not copyfile: the emulator's files report size 0.
            try:
                with open(os.path.join(top, name)) as f:
                    text = f.read()
            except OSError:
                continue            # write-only files
            with open(os.path.join(target, name), 'w') as f:
                f.write(text)
    if not mon_data:
        for dom in env.agent.caps.monitor.domain_ids:
            os.makedirs(os.path.join(dest, 'mon_data', 'mon_L3_%02d' % dom))
    return dest


def agent_on(env, root):
    """A second agent over the same instances, on resctrl at *root*.

    Built on that root: the agent hands its Resctrl to the readers it
    builds, so one swapped in afterwards would leave them on FUSE.
    """
    CONF.set_override('resctrl_root', root, 'rdt')
    try:
        return agent_cmd.build_agent(CONF, source=env.source)
    finally:
        CONF.set_override('resctrl_root', env.mount, 'rdt')


class OpenCounter(object):
    """Counts the files opened (``os.open``), by path, while installed."""

    def __init__(self):
        self.paths = []
        self._real = None

    def __call__(self, path, *args, **kwargs):
        self.paths.append(str(path))
        return self._real(path, *args, **kwargs)

    def __enter__(self):
        self._real = os.open
        os.open = self
        return self

    def __exit__(self, *exc):
        os.open = self._real


def shared(pct):
    return model.BandwidthPolicy('percent', pct, pct, model.SHARED)


def percentile(values, pct):
    values = sorted(values)
    if not values:
        return float('nan')
    index = min(len(values) - 1, int(round(pct / 100.0 * (len(values) - 1))))
    return values[index]


def summary(values, scale=1.0, fmt='%.2f'):
    return 'median %s, p95 %s, max %s' % (
        fmt % (statistics.median(values) * scale),
        fmt % (percentile(values, 95) * scale),
        fmt % (max(values) * scale))


class EmulatedHost(object):
    """An emulated resctrl, fake QEMUs and an agent over them."""

    def __init__(self, profile='reference', kernel=None, **agent_opts):
        logging.disable(logging.WARNING)
        self.dir = tempfile.mkdtemp(prefix='rdt-bench-')
        self.mount = os.path.join(self.dir, 'resctrl')
        os.mkdir(self.mount)
        self.emulator = launcher.mount(self.mount, profile, kernel=kernel)
        self.client = self.emulator.client
        CONF([], project='rdt-virt')
        CONF.set_override('resctrl_root', self.mount, 'rdt')
        CONF.set_override('state_file', os.path.join(self.dir, 'state.json'),
                          'rdt')
        opts = dict(proc_root=os.path.join(self.dir, 'proc'),
                    qemu_pid_dir=None, retry_interval=0.0,
                    prometheus_port=0)
        opts.update(agent_opts)
        for name, value in opts.items():
            CONF.set_override(name, value, 'rdt_agent')
        privsep.sys_admin_pctxt.set_client_mode(False)
        self.host = fakeqemu.FakeHost(opts['proc_root'])
        self.source = fakeqemu.FakeSource()
        self.agent = agent_cmd.build_agent(CONF, source=self.source)
        self.count = 0

    def boot(self, bw=None, vcpus=4, monitor=True, event=False):
        uuid = str(uuid_mod.uuid4())
        self.count += 1
        self.host.start(uuid, vcpus=vcpus, others=1)
        self.source.start(model.Instance(
            uuid, 'instance-%08x' % self.count, self.count, bandwidth=bw,
            monitor=monitor), event=event)
        return uuid

    def destroy(self, uuid, event=False):
        self.source.stop(uuid, event=event)
        self.host.stop(uuid)

    def seq(self):
        entries = self.client.log()
        return entries[-1]['seq'] if entries else 0

    def mutations(self, since):
        return [e for e in self.client.log(since) if e['op'] in MUTATIONS]

    def close(self):
        try:
            self.host.close()
        finally:
            self.emulator.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
