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

"""Watcher in the test cloud: API (uWSGI), decision engine and applier.

Configured and registered as Watcher's DevStack plugin does it
(``devstack/lib/watcher`` of openstack/watcher): a ``watcher`` service
user with the admin role in the service project, the ``infra-optim``
service with its three endpoints, ``watcher.conf`` with
``[keystone_authtoken]`` and ``[watcher_clients_auth]``, the ``watcher``
control exchange, and Nova's versioned notifications beside the
unversioned ones (``notification_format = both``, the plugin's
``NOVA_NOTIFICATION_FORMAT``), from which the decision engine keeps its
compute model current. Gnocchi is its datasource.
"""

import os

from rdt_virt.cloud import ini
from rdt_virt.cloud import services

# (user, service name, type, port key, path), as in cloud.CATALOG.
CATALOG_ENTRY = ('watcher', 'watcher', 'infra-optim', 'watcher', '')


def conf(layout):
    """watcher.conf; returns its path."""
    path = layout.etc('watcher', 'watcher.conf')
    token, auth = services._authtoken(layout, 'watcher')
    state = layout.path('state', 'watcher')
    os.makedirs(state, exist_ok=True)
    ini.set_many(path, {
        'DEFAULT': {'debug': 'False', 'use_stderr': 'True',
                    'transport_url': layout.transport_url,
                    'control_exchange': 'watcher',
                    'state_path': state},
        'database': {'connection': layout.db_url('watcher')},
        'api': {'host': '127.0.0.1', 'port': str(layout.ports['watcher']),
                'workers': '1'},
        'oslo_concurrency': {'lock_path': os.path.join(state, 'lock')},
        'oslo_messaging_notifications': {'driver': 'messagingv2'},
        'keystone_authtoken': token,
        'watcher_clients_auth': auth,
        'watcher_datasources': {'datasources': 'gnocchi'},
        # Per strategy as well: "openstack optimize strategy state" reports
        # a strategy's datasource and metrics only from these.
        'watcher_strategies.noisy_neighbor': {'datasources': 'gnocchi'},
        'watcher_strategies.rdt_noisy_neighbor': {'datasources': 'gnocchi'},
        'gnocchi_client': {'endpoint_type': 'public',
                           'region_name': services.REGION},
        # The Prometheus path, for audits that ask for it (the audit
        # parameter datasources): Aetos from Keystone's catalog (Watcher
        # 15 on), Prometheus itself on Watcher 14, which has no Aetos.
        'aetos_client': {'interface': 'public',
                         'region_name': services.REGION},
        'prometheus_client': {'host': '127.0.0.1',
                              'port': str(layout.ports['prometheus'])},
        'nova': {'region_name': services.REGION},
        'placement': {'region_name': services.REGION},
    })
    return path


def start(cloud):
    """Schema, API under uWSGI, decision engine and applier."""
    path = conf(cloud.layout)
    cloud.run([cloud.layout.tool('watcher-db-manage'), '--config-file',
               path, 'upgrade'], 'watcher-db-manage')
    # Under uWSGI, Watcher's WSGI module parses sys.argv as its command
    # line: --pyargv hands it the configuration file.
    cloud.uwsgi('watcher-api', extra=['--pyargv', '--config-file %s' % path])
    cloud.wait_http('watcher-api', cloud.layout.url('watcher'))
    for name in ('watcher-decision-engine', 'watcher-applier'):
        tool = cloud.layout.tool(name)
        cloud.daemons.start(name, [tool, '--config-file', path],
                            env=cloud.env(), marker=tool)
