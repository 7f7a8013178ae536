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

"""Prometheus and Aetos in the test cloud, beside Gnocchi.

Prometheus is Debian 12's (package ``prometheus``, 2.42), run as one more
daemon of the cloud: its configuration in ``etc/prometheus``, its TSDB in
``state/prometheus``, listening on loopback. It scrapes every compute
host's rdt-virt-agent endpoint (job ``rdt-virt-agent``) and Ceilometer
polling agent's exporter (job ``ceilometer``) every
:data:`SCRAPE_INTERVAL`; each target carries the label ``fqdn``, the
host's name in Nova, by which Watcher's Prometheus and Aetos datasources
match hosts. The rule files ``etc/prometheus/*.yml`` of the source tree
are loaded, whatever they are, as copies in the cloud's
``etc/prometheus/rules`` that differ only in the holds (``for``) of
:data:`HOLDS`: the flow waits for those alerts to fire.

Aetos, when installed (its first release is 2025.2's), runs in front of it
as its DevStack plugin (``devstack/plugin.sh`` of openstack/aetos) sets it
up: an ``aetos`` service user with the admin role in the service project,
the ``aetos`` service of type ``metric-storage`` with its endpoints,
``aetos.conf`` with ``[keystone_authtoken]``, and Aetos's own WSGI module
(``aetos.wsgi.api``) under uWSGI. That module reads only the project's
default configuration files (it passes no command line to oslo.config),
and so does its Keystone middleware (``oslo_config_project`` in its
paste file): the API gets a home whose ``~/.aetos/aetos.conf`` is the
cloud's, as Gnocchi's does. Non-admin users' queries are restricted to
their project's series by the label ``[prometheus] project_label_name``,
which the agent's ``[rdt_agent] prometheus_project_label`` and Ceilometer's
exporter both call ``project``.
"""

import glob
import importlib.util
import os
import urllib.request

import yaml

from rdt_virt.cloud import ini
from rdt_virt.cloud import process
from rdt_virt.cloud import services

PROMETHEUS = '/usr/bin/prometheus'
PROMTOOL = '/usr/bin/promtool'
# Short, for the test: a new series is in Prometheus seconds after the
# agent publishes it.
SCRAPE_INTERVAL = '5s'
SCRAPE_TIMEOUT = '4s'
# The target label naming the compute host (Watcher's default
# [prometheus_client] fqdn_label).
FQDN_LABEL = 'fqdn'
PROJECT_LABEL = 'project'
# (job name, port key prefix in services.PORTS): the exporters of each
# compute host.
JOBS = (('rdt-virt-agent', 'agent_prom'), ('ceilometer', 'ceilometer_prom'))
RULES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'etc', 'prometheus', '*.yml')
# The test cloud's hold (seconds) of each alert whose firing the flow
# waits for: the rule files' own, production's, would make it wait minutes
# for nothing more (promtool's tests check those holds).
HOLDS = {'RdtVirtAgentDown': 60}
# (user, service name, type, port key, path), as in cloud.CATALOG.
CATALOG_ENTRY = ('aetos', 'aetos', 'metric-storage', 'aetos', '')


def aetos_installed():
    """Whether Aetos is installed (2025.2 and later; 2025.1 has none)."""
    return importlib.util.find_spec('aetos') is not None


def rule_files(pattern=RULES):
    """The rule files Prometheus loads: those of the source tree."""
    return sorted(glob.glob(pattern))


def targets(layout, hosts=None):
    """[(job, compute host, address)] of every exporter to scrape."""
    hosts = hosts or [h for h, _ in services.COMPUTES]
    return [(job, host,
             '127.0.0.1:%d' % layout.ports['%s_%s' % (key, host)])
            for job, key in JOBS for host in hosts]


def config(scrape_targets, rule_files=(), interval=SCRAPE_INTERVAL,
           timeout=SCRAPE_TIMEOUT):
    """prometheus.yml as a dict.

    :param scrape_targets: [(job, host, address)]: one scrape job per job
        name, in order, each target with its host as ``fqdn``.
    :param rule_files: paths or globs, as Prometheus takes them.
    """
    jobs = {}
    for job, host, address in scrape_targets:
        jobs.setdefault(job, []).append({'targets': [address],
                                         'labels': {FQDN_LABEL: host}})
    return {
        'global': {'scrape_interval': interval,
                   'scrape_timeout': timeout,
                   'evaluation_interval': interval},
        'rule_files': list(rule_files),
        'scrape_configs': [{'job_name': job, 'static_configs': static}
                           for job, static in jobs.items()],
    }


def render(conf):
    """YAML for :func:`config`'s dict, in its order."""
    return yaml.safe_dump(conf, default_flow_style=False, sort_keys=False)


def with_holds(doc, holds=HOLDS):
    """Hold the alerts of ``holds`` that many seconds in a rule file's doc.

    Returns the ``(alert, hold, rule file's hold)`` changed.
    """
    changed = []
    for group in doc.get('groups') or ():
        for rule in group.get('rules') or ():
            name = rule.get('alert')
            if name in holds:
                hold = '%ds' % holds[name]
                changed.append((name, hold, rule.get('for')))
                rule['for'] = hold
    return changed


def write_rules(layout, pattern=RULES, holds=HOLDS):
    """The cloud's copies of the rule files; returns {copy: changes}."""
    directory = layout.etc('prometheus', 'rules')
    os.makedirs(directory, exist_ok=True)
    written = {}
    for source in rule_files(pattern):
        with open(source) as f:
            doc = yaml.safe_load(f)
        changed = with_holds(doc, holds)
        path = os.path.join(directory, os.path.basename(source))
        with open(path, 'w') as f:
            f.write('# %s, the test cloud\'s holds: %s.\n' % (
                source, ', '.join('%s for %s (not %s)' % c for c in changed)
                or 'none changed'))
            yaml.safe_dump(doc, f, default_flow_style=False, sort_keys=False)
        written[path] = changed
    return written


def loaded_rules(layout):
    """The rule files the cloud's Prometheus loads (:func:`write_rules`)."""
    return rule_files(layout.etc('prometheus', 'rules', '*.yml'))


def write_config(layout):
    """etc/prometheus/prometheus.yml and its rules; returns its path."""
    path = layout.etc('prometheus', 'prometheus.yml')
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_rules(layout)
    with open(path, 'w') as f:
        f.write('# The test cloud\'s Prometheus (rdt_virt.cloud.prometheus)'
                '.\n')
        f.write(render(config(targets(layout), [
            layout.etc('prometheus', 'rules', '*.yml')])))
    return path


def argv(layout, conf):
    return [PROMETHEUS, '--config.file=%s' % conf,
            '--storage.tsdb.path=%s' % layout.path('state', 'prometheus'),
            '--storage.tsdb.retention.time=1d',
            '--web.listen-address=127.0.0.1:%d' % layout.ports['prometheus'],
            # Aetos's admin commands (delete series, snapshot, clean
            # tombstones) use Prometheus's TSDB admin API.
            '--web.enable-admin-api']


def url(layout, path=''):
    return layout.url('prometheus', path)


def ready(layout):
    try:
        with urllib.request.urlopen(url(layout, '/-/ready'),
                                    timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def aetos_conf(layout):
    """aetos.conf, and the API's home that points at it; returns both."""
    path = layout.etc('aetos', 'aetos.conf')
    token, _ = services._authtoken(layout, 'aetos')
    ini.set_many(path, {
        'DEFAULT': {'debug': 'False', 'use_stderr': 'True',
                    'auth_mode': 'keystone'},
        'prometheus': {'host': '127.0.0.1',
                       'port': str(layout.ports['prometheus']),
                       'project_label_name': PROJECT_LABEL},
        'keystone_authtoken': token,
    })
    home = layout.etc('aetos', 'home')
    os.makedirs(os.path.join(home, '.aetos'), exist_ok=True)
    link = os.path.join(home, '.aetos', 'aetos.conf')
    if not os.path.lexists(link):
        os.symlink(path, link)
    return path, home


def start(cloud):
    """Prometheus, then Aetos in front of it when installed."""
    layout = cloud.layout
    for tool in (PROMETHEUS, PROMTOOL):
        if not os.access(tool, os.X_OK):
            raise process.ProcessError(
                '%s is missing: Debian\'s prometheus package, in bindep\'s '
                'cloud profile' % tool)
    conf = write_config(layout)
    # promtool checks the rule files too, and says what is wrong.
    cloud.run([PROMTOOL, 'check', 'config', conf], 'promtool')
    os.makedirs(layout.path('state', 'prometheus'), exist_ok=True)
    cloud.daemons.start('prometheus', argv(layout, conf), env=cloud.env(),
                        marker=conf, cwd=layout.path('state', 'prometheus'))
    cloud.daemons.wait('prometheus', lambda: ready(layout), 120,
                       'answer %s' % url(layout, '/-/ready'))
    if not aetos_installed():
        return
    _, home = aetos_conf(layout)
    cloud.uwsgi('aetos-api', env={'HOME': home})
    cloud.wait_http('aetos-api', layout.url('aetos'))
