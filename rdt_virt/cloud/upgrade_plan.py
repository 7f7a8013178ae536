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

"""The steps of the test cloud's upgrade, as data (no I/O).

:func:`steps` is the order the admin guide's upgrade page gives: the
control plane service by service, each with its own schema migrations,
then a pause with computes of both releases, then one compute host at a
time (nova-compute, rdt-virt-agent and Ceilometer's polling agent
together), and last the online data migrations that wait for every
service to be upgraded. :mod:`rdt_virt.cloud.upgrade` carries them out.

Commands name a tool and its arguments; ``{name}`` in an argument is the
configuration file of that name (``keystone``, ``nova``, ...), filled in
by the caller, and tools are taken from the new release's environment
(Gnocchi's from its own, which the cloud does not change).
"""

import collections

#: OpenStack releases the test cloud runs, and their tox environments.
ENVS = {'2025.1': 'cloud-2025.1', '2026.1': 'cloud-2026.1',
        '2026.2': 'cloud'}
#: Upgrades the test cloud runs: SLURP to the next SLURP (skip-level).
UPGRADES = (('2025.1', '2026.1'),)
#: Nova's major version in each release (DESIGN: stable branches).
NOVA = {'2025.1': 31, '2025.2': 32, '2026.1': 33, '2026.2': 34}

#: A command run during a step. ``codes``: exit codes that pass, None for
#: any. ``keystone-manage doctor`` exits with the number of its advices
#: and ``nova-status upgrade check`` with 1 for warnings: both are shown
#: rather than failed on; the online data migrations exit 1 when they
#: migrated something.
Command = collections.namedtuple('Command', 'argv codes')

#: ``stop``: the cloud's daemons stopped, in order; ``before``: commands
#: run while they are stopped; ``start``: what starts again, from the new
#: environment; ``after``: commands once they run; ``plugin``: the
#: DevStack plugin's install phase, run again for the new environment
#: (the compute driver's loader into its Nova). Configuration files are
#: kept, as an operator's configuration management keeps them, but for
#: the paths of the new environment's tools.
Step = collections.namedtuple(
    'Step', 'name kind host stop before start after plugin')

CONTROL, MIXED, COMPUTE, FINISH = 'control', 'mixed', 'compute', 'finish'
#: The daemons of one compute host's upgrade, stopped together.
COMPUTE_DAEMONS = ('nova-compute', 'rdt-virt-agent', 'ceilometer-polling')
#: Daemons stopped once the rest of their step is down, and started first:
#: the agent keeps the groups and the controller's levels while
#: nova-compute shuts down gracefully, which takes up to 20 s.
LAST = ('rdt-virt-agent',)


def parse(spec):
    """``'OLD:NEW'`` as (old, new).

    :raises ValueError: for another form, or an upgrade the test cloud
        does not run.
    """
    old, sep, new = (spec or '').partition(':')
    if not sep or (old, new) not in UPGRADES:
        raise ValueError('%r: the upgrades the test cloud runs are %s' % (
            spec, ', '.join('%s:%s' % u for u in UPGRADES)))
    return old, new


def release_of(nova_version):
    """The OpenStack release of a Nova version string, or None."""
    try:
        major = int(str(nova_version).split('.')[0])
    except ValueError:
        return None
    return {v: k for k, v in NOVA.items()}.get(major)


def _cmd(*argv, codes=(0,)):
    return Command(list(argv), None if codes is None else tuple(codes))


def _step(name, kind, stop=(), before=(), start=None, after=(), plugin=(),
          host=None):
    return Step(name, kind, host, list(stop), list(before),
                list(stop if start is None else start), list(after),
                list(plugin))


def control_plane():
    """The control plane, one service after the other."""
    keystone = ['keystone-manage', '--config-file', '{keystone}']
    glance = ['glance-manage', '--config-file', '{glance}', 'db']
    nova = ['nova-manage', '--config-file', '{nova}']
    placement = ['placement-manage', '--config-file', '{placement}', 'db']
    return [
        # Expand, migrate and contract, as a rolling upgrade does them; on
        # one node the service is down for all three.
        _step('Keystone', CONTROL, ['keystone'], before=[
            _cmd(*keystone, 'db_sync', '--expand'),
            _cmd(*keystone, 'db_sync', '--migrate'),
            _cmd(*keystone, 'db_sync', '--contract')],
            after=[_cmd(*keystone, 'doctor', codes=None)]),
        _step('Placement', CONTROL, ['placement-api'],
              before=[_cmd(*placement, 'sync')],
              after=[_cmd(*placement, 'online_data_migrations',
                          codes=(0, 1))]),
        _step('Glance', CONTROL, ['glance-api'], before=[
            _cmd(*glance, 'expand'), _cmd(*glance, 'migrate'),
            _cmd(*glance, 'contract')]),
        _step("Neutron's API", CONTROL, ['neutron-api'], before=[
            _cmd('neutron-db-manage', '--config-file', '{neutron}',
                 'upgrade', 'heads')]),
        # Conductor first: the computes of the old release reach the
        # database through it; the scheduler before any compute.
        _step("Nova's conductor, scheduler and API", CONTROL,
              ['nova-api', 'nova-scheduler', 'nova-conductor'],
              start=['nova-conductor', 'nova-scheduler', 'nova-api'],
              before=[_cmd(*nova, 'api_db', 'sync'),
                      _cmd(*nova, 'db', 'sync'),
                      _cmd('nova-status', '--config-file', '{nova}',
                           'upgrade', 'check', codes=(0, 1))]),
        # Gnocchi is released apart from OpenStack and keeps its own
        # environment: its schema is checked and the API restarted.
        _step('Gnocchi', CONTROL, ['gnocchi-metricd', 'gnocchi-api'],
              start=['gnocchi-api', 'gnocchi-metricd'], before=[
                  _cmd('gnocchi-upgrade', '--config-file', '{gnocchi}')]),
        _step("Ceilometer's notification agent", CONTROL,
              ['ceilometer-notification'], before=[
                  _cmd('ceilometer-upgrade', '--config-file',
                       '{ceilometer}')]),
        _step('Watcher', CONTROL,
              ['watcher-applier', 'watcher-decision-engine', 'watcher-api'],
              start=['watcher-api', 'watcher-decision-engine',
                     'watcher-applier'],
              before=[_cmd('watcher-db-manage', '--config-file',
                           '{watcher}', 'upgrade')]),
    ]


def compute(host):
    """One compute host: its three services stopped and started together.

    The emulated host (libvirtd, resctrl, the guests) stays: a package
    upgrade restarts services, not the kernel or libvirtd.
    """
    names = ['%s-%s' % (host, d) for d in COMPUTE_DAEMONS]
    last = [n for n in names if _last(n)]
    return _step('compute host %s' % host, COMPUTE, names, host=host,
                 start=last + [n for n in names if n not in last],
                 plugin=[(host, ('n-cpu',))])


def _last(name):
    return any(name == d or name.endswith('-' + d) for d in LAST)


def stop_order(step):
    """The step's daemons, in the groups stopped one after the other."""
    last = [n for n in step.stop if _last(n)]
    return [g for g in ([n for n in step.stop if n not in last], last) if g]


def steps(computes=('compute2', 'compute1')):
    """Every step, in order."""
    nova = 'nova-manage', '--config-file', '{nova}'
    return (control_plane() +
            [_step('Computes of both releases', MIXED, start=[])] +
            [compute(h) for h in computes] +
            [_step('Online data migrations', FINISH, start=[], after=[
                _cmd(*nova, 'db', 'online_data_migrations',
                     codes=(0, 1))])])


def format_argv(argv, confs):
    """``argv`` with each ``{name}`` replaced by ``confs[name]``."""
    return [a.format(**confs) if a.startswith('{') else a for a in argv]


def movable(required, traits):
    """Whether a server whose flavor requires ``required`` can go to a host.

    :param required: the flavor's required traits (``CUSTOM_RDT_*``).
    :param traits: the other host's traits in Placement.
    """
    return set(required) <= set(traits)
