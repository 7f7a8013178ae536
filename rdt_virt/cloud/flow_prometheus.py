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

"""The flow's Prometheus and Aetos steps, typed as an operator and tenants.

:func:`targets`: Aetos is in Keystone's catalog as ``metric-storage`` and
Prometheus scrapes every compute host's two exporters (``openstack metric
query up`` as admin). :func:`tenants`: two projects, a member of each who
boots a server, and what each sees through Aetos: ``openstack metric
query`` gives a member the RDT series of the own project's servers and
nothing of the other's, even when asked for it by name; the admin sees
both. Both take the :class:`~rdt_virt.cloud.flow.Flow`.

``openstack metric`` here is python-observabilityclient's, from an
environment without gnocchiclient (the layout's ``metric_client_bin``):
gnocchiclient's plugin registers ``openstack metric list``, ``show`` and
``delete`` too, and where both plugins are installed openstackclient keeps
whichever it loads last (doc/source/admin/prometheus-aetos.rst). Gnocchi
is read with gnocchiclient's own ``gnocchi`` command, as everywhere in the
flow.
"""

import json
import os
import time
import urllib.parse
import urllib.request

from rdt_virt.cloud import prometheus
from rdt_virt.cloud import services

BANDWIDTH = 'rdt_virt_instance_memory_bandwidth_total_bytes_per_second'
OCCUPANCY = 'rdt_virt_instance_llc_occupancy_bytes'
POLICY = 'rdt_virt_instance_policy'
REQUESTED = 'rdt_virt_instance_policy_requested'
# (project, member, server): each member boots one server in the project.
TENANTS = (('tenant-a', 'alice', 'a-1'), ('tenant-b', 'bob', 'b-1'))
# The tenants' flavor: dedicated L3 (hw:cache_l3=2048), held as one way of
# 3328 KiB, so the agent publishes what the host applies beside the
# request. Only compute2 has a CLOSID left for it at this point.
FLAVOR = 'rdt.protected'
IMAGE = 'rdt-work'


def _client(flow):
    """openstackclient with python-observabilityclient, no gnocchiclient."""
    bin_dir = flow.cloud.layout.metric_client_bin
    tool = os.path.join(bin_dir or '', 'openstack')
    if not bin_dir or not os.access(tool, os.X_OK):
        flow.expect(False, 'no "openstack metric" client: build it with '
                    '"tox -e metric-client --notest" and give its bin '
                    'directory (--metric-client-bin, '
                    'RDT_VIRT_METRIC_CLIENT_BIN)')
    return tool


def metric(flow, *args, **kw):
    """``openstack metric ...`` of the metric client."""
    return flow.sh(_client(flow), 'metric', *args, **kw)


def table_rows(text):
    """[{column: cell}] of the first table in openstackclient's output."""
    lines = [line for line in text.splitlines() if line.startswith('|')]
    if not lines:
        return []
    cells = [[c.strip() for c in line.strip().strip('|').split('|')]
             for line in lines]
    return [dict(zip(cells[0], row)) for row in cells[1:]]


def field(text, name):
    """A field of openstackclient's ``show``/``create`` table."""
    return {r.get('Field'): r.get('Value')
            for r in table_rows(text)}.get(name)


def query(flow, promql, columns, env=None):
    """``openstack metric query``, shown as a table; returns its rows."""
    args = ['query', promql]
    for column in columns:
        args += ['-c', column]
    _, text = metric(flow, *args, env=env)
    if not text.strip():
        flow.out('(nothing: no series)')
    return table_rows(text)


def prom_api(flow, path):
    """The ``data`` of Prometheus's own answer, or None."""
    try:
        with urllib.request.urlopen(prometheus.url(flow.cloud.layout, path),
                                    timeout=10) as resp:
            return json.load(resp)['data']
    except (OSError, ValueError, KeyError):
        return None


def prom_query(flow, query):
    """Prometheus's own answer (the flow's waits; not shown)."""
    return (prom_api(flow, '/api/v1/query?' + urllib.parse.urlencode(
        {'query': query})) or {}).get('result') or []


def admin_env(flow):
    """The admin's environment; Prometheus itself when there is no Aetos.

    Without a ``metric-storage`` endpoint python-observabilityclient
    reads Prometheus directly from PROMETHEUS_HOST and PROMETHEUS_PORT.
    """
    if prometheus.aetos_installed():
        return flow.env
    return dict(flow.env, PROMETHEUS_HOST='127.0.0.1',
                PROMETHEUS_PORT=str(flow.cloud.layout.ports['prometheus']))


def targets(flow):
    """Prometheus scrapes every exporter, and Aetos answers for it."""
    jobs = {(job, host) for job, host, _ in prometheus.targets(
        flow.cloud.layout)}
    if prometheus.aetos_installed():
        flow.table('endpoint', 'list', '--service', 'metric-storage', '-c',
                   'Service Name', '-c', 'Service Type', '-c', 'Interface',
                   '-c', 'URL')
    else:
        flow.out('  note: no Aetos in this release (its first is '
                 '2025.2\'s): "openstack metric" reads Prometheus directly')

    def up():
        found = {(r['metric'].get('job'), r['metric'].get(
            prometheus.FQDN_LABEL)) for r in prom_query(flow, 'up == 1')}
        return jobs <= found
    flow.wait('Prometheus to scrape every exporter', up, timeout=60,
              interval=3)
    rows = query(flow, 'up', ('job', prometheus.FQDN_LABEL, 'instance',
                              'value'), env=admin_env(flow))
    seen = {(r.get('job'), r.get(prometheus.FQDN_LABEL)) for r in rows
            if r.get('value') == '1'}
    flow.expect(jobs <= seen,
                'Prometheus scrapes %d targets, up: the agent\'s and '
                'Ceilometer\'s exporters of %s, each labelled with its '
                'host as %s' % (len(jobs), ', '.join(
                    h for h, _ in services.COMPUTES),
                    prometheus.FQDN_LABEL))
    rules(flow)


def rules(flow):
    """Prometheus evaluates every rule of the source tree's rule files.

    Aetos serves no rules: this is read from Prometheus itself, as an
    operator does on its host.
    """
    files = prometheus.loaded_rules(flow.cloud.layout)
    if not files:
        flow.out('  note: no rule files in %s' % prometheus.RULES)
        return
    flow.out('  note: the test cloud holds %s; production keeps the rule '
             'files\' holds' % ', '.join(
                 '%s for %d s' % kv
                 for kv in sorted(prometheus.HOLDS.items())))
    path = '/api/v1/rules'

    def evaluated():
        groups = (prom_api(flow, path) or {}).get('groups') or []
        health = {r.get('health') for g in groups for r in g['rules']}
        return groups if groups and health <= {'ok', 'err'} else None
    groups = flow.wait('Prometheus to evaluate its rules', evaluated,
                       timeout=60, interval=3)
    flow.out('$ curl -s %s   (summed up: group, file, rules, health)' %
             prometheus.url(flow.cloud.layout, path))
    for g in groups:
        health = sorted({r.get('health') for r in g['rules']})
        flow.out('%s  %s  %d rules  %s' % (
            g['name'], os.path.basename(g['file']), len(g['rules']),
            ','.join(health)))
    errors = ['%s: %s' % (r.get('name'), r.get('lastError'))
              for g in groups for r in g['rules'] if r.get('health') != 'ok']
    flow.expect({g['file'] for g in groups} == set(files) and not errors,
                'Prometheus evaluates the %d rules of %s without an error%s'
                % (sum(len(g['rules']) for g in groups), ', '.join(
                    os.path.basename(f) for f in files),
                   ''.join('; ' + e for e in errors)))


def _openrc(flow, project, user):
    """A tenant's openrc file (written) and environment."""
    values = dict(flow.cloud.openrc(), OS_USERNAME=user,
                  OS_PROJECT_NAME=project)
    path = os.path.join(flow.work, '%s-openrc' % project)
    with open(path, 'w') as f:
        for key, value in sorted(values.items()):
            f.write('export %s=%s\n' % (key, value))
    return path, flow.cloud.env(**values)


def _as(flow, path):
    flow.out('$ source %s' % path)


def _series(rows):
    """{instance uuid: {project}} of ``openstack metric query`` rows."""
    found = {}
    for row in rows or []:
        found.setdefault(row.get('instance_uuid'), set()).add(
            row.get(prometheus.PROJECT_LABEL))
    return found


def tenants(flow):
    """A member sees the own project's servers' series, the admin all."""
    if not prometheus.aetos_installed():
        flow.out('  note: no Aetos in this release (its first is '
                 '2025.2\'s): no per-project view to show')
        return
    _client(flow)
    ids, envs, rcs, uuids = {}, {}, {}, {}
    for project, user, _ in TENANTS:
        ids[project] = field(flow.os(
            'project', 'create', '--domain', 'default', '--or-show',
            project, '-c', 'id', '-c', 'name')[1], 'id')
        flow.os('user', 'create', '--domain', 'default', '--project',
                project, '--password', services.PASSWORD, '--or-show', user,
                '-c', 'name', '-c', 'default_project_id')
        flow.os('role', 'add', '--project', project, '--user', user,
                'member')
        rcs[project], envs[project] = _openrc(flow, project, user)
    # Both boot at once; then each member waits for their own.
    for project, user, server in TENANTS:
        _as(flow, rcs[project])
        uuids[project] = field(flow.os(
            'server', 'create', '--flavor', FLAVOR, '--image', IMAGE,
            '--nic', 'none', server, '-c', 'id', '-c', 'name', '-c',
            'status', '-c', 'project_id', env=envs[project])[1], 'id')
    for project, _, server in TENANTS:
        flow.wait('%s ACTIVE' % server, lambda p=project, s=server: _active(
            flow, s, envs[p]), timeout=300)
    try:
        _tenant_view(flow, ids, envs, rcs, uuids)
    finally:
        for project, _, server in TENANTS:
            _as(flow, rcs[project])
            flow.os('server', 'delete', '--wait', server, env=envs[project])
        flow.out('$ source %s' % flow.cloud.layout.path('openrc'))


def _active(flow, server, env):
    found = flow.os('server', 'show', server, parse=True, show=False,
                    env=env)
    if found and found['status'] == 'ERROR':
        flow.expect(False, '%s went to ERROR: %s' % (server,
                                                     found.get('fault')))
    return found if found and found['status'] == 'ACTIVE' else None


def _tenant_view(flow, ids, envs, rcs, uuids):
    (a, _, a_server), (b, _, b_server) = TENANTS
    wanted = {BANDWIDTH, OCCUPANCY, POLICY, REQUESTED}

    def published():
        # The agent's second sample gives the first rates; then the next
        # scrape.
        names = {}
        for r in prom_query(flow, '{__name__=~"%s",instance_uuid=~"%s"}' % (
                '|'.join(sorted(wanted)), '|'.join(uuids.values()))):
            names.setdefault(r['metric']['instance_uuid'], set()).add(
                r['metric']['__name__'])
        return all(names.get(u, set()) >= wanted for u in uuids.values())
    flow.wait("Prometheus to have both tenants' servers' series",
              published, timeout=180, interval=5)

    _as(flow, rcs[a])
    flow.os('server', 'list', '-c', 'ID', '-c', 'Name', '-c', 'Status',
            env=envs[a])
    columns = ('instance_uuid', prometheus.PROJECT_LABEL,
               prometheus.FQDN_LABEL, 'value')
    for name in (BANDWIDTH, OCCUPANCY):
        seen = _series(query(flow, name, columns, env=envs[a]))
        flow.expect(seen == {uuids[a]: {ids[a]}},
                    '%s sees %s of %s only, labelled with its project' % (
                        a, name, a_server))
    settings = ('instance_uuid', prometheus.PROJECT_LABEL, 'setting',
                'value')
    applied = query(flow, POLICY, settings, env=envs[a])
    asked = query(flow, REQUESTED, settings, env=envs[a])
    held = {r.get('setting'): float(r['value']) for r in applied}
    request = {r.get('setting'): float(r['value']) for r in asked}
    flow.expect(_series(applied) == {uuids[a]: {ids[a]}} and
                _series(asked) == {uuids[a]: {ids[a]}} and
                request.get('cache_l3') == 2048 and
                held.get('cache_l3', 0) >= 2048,
                '%s sees what the host holds for %s beside its request: '
                'cache_l3 %g KiB for %g' % (a, a_server,
                                            held.get('cache_l3', 0),
                                            request.get('cache_l3', 0)))
    # Asked for the other project's series by name: Aetos adds the
    # caller's project to every selector, so nothing matches.
    for promql in ('{%s="%s"}' % (prometheus.PROJECT_LABEL, ids[b]),
                   '%s{%s=~".+"}' % (BANDWIDTH, prometheus.PROJECT_LABEL)):
        shown = _series(query(flow, promql, columns, env=envs[a]))
        flow.expect(uuids[b] not in shown and set(shown) <= {uuids[a]},
                    '%s gets nothing of %s\'s %s for %s' % (
                        a, b, b_server, promql))

    flow.out('$ source %s' % flow.cloud.layout.path('openrc'))
    seen = _series(query(flow, BANDWIDTH, columns))
    flow.expect(seen.get(uuids[a]) == {ids[a]} and
                seen.get(uuids[b]) == {ids[b]},
                'the admin sees both, %s\'s %s and %s\'s %s, each with '
                'its project' % (a, a_server, b, b_server))
    flow.out('  (%s)' % ', '.join('%s: %s' % (s, uuids[p])
                                  for p, _, s in TENANTS))


# The alert the flow sees firing and resolving: the agent's exporter gone.
DOWN = 'RdtVirtAgentDown'
AGENT_JOB = 'rdt-virt-agent'


def _alerts(flow, host, state=None):
    match = 'alertname="%s",%s="%s"' % (DOWN, prometheus.FQDN_LABEL, host)
    if state:
        match += ',alertstate="%s"' % state
    return prom_query(flow, 'ALERTS{%s}' % match)


def _up(flow, host):
    query = 'up{job="%s",%s="%s"}' % (AGENT_JOB, prometheus.FQDN_LABEL, host)
    return [r['value'][1] for r in prom_query(flow, query)]


def _show_alerts(flow, resolved=False):
    promql = 'ALERTS{alertname="%s"}' % DOWN
    if not resolved:
        query(flow, promql, ('alertname', 'alertstate',
                             prometheus.FQDN_LABEL, 'severity'),
              env=admin_env(flow))
        return
    # No series: python-observabilityclient then knows no column but
    # "value", and refuses any other one asked for by -c.
    _, text = metric(flow, 'query', promql, env=admin_env(flow))
    if not table_rows(text):
        flow.out('(nothing: no series)')


def stop_agent(flow, host):
    """Stop ``host``'s agent: its exporter goes, the alert is pending.

    Prometheus evaluates the shipped rules every 5 s here; the alert
    fires after the test cloud's hold (:data:`prometheus.HOLDS`), which the
    next steps fill.
    """
    flow.out('$ systemctl stop devstack@rdt-virt-agent   (on %s; here: '
             'its pid file\'s process group, SIGTERM)' % host)
    flow.cloud.stop_agent(host)
    flow.agent_stopped = time.monotonic()
    flow.wait("Prometheus to find %s's agent down" % host,
              lambda: _up(flow, host) == ['0'], timeout=60, interval=2)
    flow.wait('%s pending' % DOWN, lambda: _alerts(flow, host, 'pending'),
              timeout=60, interval=2)
    _show_alerts(flow)
    flow.expect(True, "Prometheus scrapes %s's agent in vain: %s is pending"
                % (host, DOWN))


def alert_fires_and_resolves(flow, host):
    """The alert fires, and resolves once the agent is back."""
    flow.wait('%s to fire' % DOWN, lambda: _alerts(flow, host, 'firing'),
              timeout=prometheus.HOLDS[DOWN] + 120, interval=5)
    _show_alerts(flow)
    # Not before its hold: the rule Prometheus evaluates is the copy.
    after = time.monotonic() - flow.agent_stopped
    flow.expect(after >= prometheus.HOLDS[DOWN],
                '%s fires for %s, %.0f s after its agent stopped (held %d s)'
                % (DOWN, host, after, prometheus.HOLDS[DOWN]))
    flow.out('$ systemctl start devstack@rdt-virt-agent   (on %s)' % host)
    flow.cloud.start_agent(host)
    started = time.monotonic()
    flow.wait("Prometheus to scrape %s's agent again" % host,
              lambda: _up(flow, host) == ['1'], timeout=120, interval=2)
    flow.wait('%s to resolve' % DOWN, lambda: not _alerts(flow, host),
              timeout=60, interval=2)
    _show_alerts(flow, resolved=True)
    flow.expect(True, '%s resolved %.0f s after the agent started again'
                % (DOWN, time.monotonic() - started))
