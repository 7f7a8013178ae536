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

"""``rdt-virt-agent``: the rdt-virt host agent.

::

    rdt-virt-agent --config-file /etc/rdt-virt/rdt-virt.conf

Runs until SIGTERM or SIGINT. Privileged resctrl writes go through an
oslo.privsep daemon (``[rdt_virt_privsep]``): forked at start when the
agent runs as root, else started with ``sudo privsep-helper`` unless
``helper_command`` says otherwise. The loop is a single thread fed by
libvirt's event thread (doc/source/admin/agent.rst says why it is not
oslo.service's eventlet loop).
"""

import os
import signal
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging
from oslo_privsep import priv_context

from rdt_virt.agent import domains
from rdt_virt.agent import executor
from rdt_virt.agent import procfs
from rdt_virt.agent import service
from rdt_virt.cmd import output
from rdt_virt import conf as rdt_conf
from rdt_virt import exception
from rdt_virt import privsep
from rdt_virt.resctrl import fs

CONF = rdt_conf.CONF
LOG = logging.getLogger(__name__)


def build_agent(conf=CONF, source=None, proc=None, api=None):
    """An :class:`~rdt_virt.agent.service.Agent` from configuration.

    The optional arguments replace the libvirt source, the procfs reader
    and the privileged API (tests and benchmarks).
    """
    opts = conf.rdt_agent
    resctrl = fs.Resctrl(conf.rdt.resctrl_root, conf.rdt.group_prefix,
                         osrelease=conf.rdt.kernel_release_file)
    if source is None:
        source = domains.LibvirtSource(
            opts.libvirt_uri, default_monitor=conf.rdt.monitoring,
            refresh_interval=opts.domain_refresh_interval)
    if proc is None:
        proc = procfs.ProcFS(opts.proc_root, opts.qemu_pid_dir)
    ex = executor.Executor(api) if api is not None else executor.Executor()
    return service.Agent(conf, resctrl, source, proc, ex)


def agent_totals(agent):
    """The agent's counters for its Prometheus endpoint."""
    totals = dict(agent.totals, tick_cpu=agent.last_tick.cpu)
    failures = getattr(agent.executor, 'failures', None)
    if failures is not None:
        totals['write_failures'] = dict(failures)
    return totals


def start_prometheus(agent, conf=CONF):
    """Serve the agent's metrics if ``prometheus_port`` is set."""
    opts = conf.rdt_agent
    if not opts.prometheus_port:
        return None
    try:
        from rdt_virt.telemetry import prometheus
    except ImportError:
        LOG.warning('prometheus-client is not installed; no metrics '
                    'endpoint')
        return None

    try:
        # Read here: oslo.config checks a value when it is read, and a bad
        # label name costs the metrics only.
        project_label = opts.prometheus_project_label
        server = prometheus.serve(
            opts.prometheus_host, opts.prometheus_port,
            lambda: agent.last_doc, lambda: agent_totals(agent),
            instance_names=opts.prometheus_instance_names,
            group_prefix=conf.rdt.group_prefix,
            certfile=opts.prometheus_tls_cert,
            keyfile=opts.prometheus_tls_key,
            client_cafile=opts.prometheus_tls_client_ca,
            project_label=project_label)
    except (exception.InvalidConfig, cfg.ConfigFileValueError) as e:
        # Metrics are not worth stopping the agent's real work for.
        LOG.error('Not serving Prometheus metrics: %s', e)
        return None
    LOG.info('Serving Prometheus metrics on %s:%d%s', opts.prometheus_host,
             opts.prometheus_port,
             ' (TLS)' if opts.prometheus_tls_cert else '')
    return server


@output.quiet
def main(argv=None):
    logging.register_options(CONF)
    CONF(sys.argv[1:] if argv is None else argv, project='rdt-virt',
         prog='rdt-virt-agent')
    logging.setup(CONF, 'rdt-virt-agent')
    if os.geteuid() == 0:
        # Already root: fork the privileged daemon, no sudo needed.
        privsep.sys_admin_pctxt.start(priv_context.Method.FORK)
    else:
        priv_context.init(root_helper=['sudo'])
    agent = build_agent()
    stop = threading.Event()

    def on_signal(signum, frame):
        LOG.info('Signal %d: stopping', signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = start_prometheus(agent)
    LOG.info('rdt-virt-agent on %s (libvirt %s)', CONF.rdt.resctrl_root,
             CONF.rdt_agent.libvirt_uri)
    try:
        agent.run(stop)
    finally:
        if server is not None:
            server.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
