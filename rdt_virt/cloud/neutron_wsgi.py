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

"""Neutron's API application (``neutron.wsgi.api``), mappers configured.

Neutron's port listing and port show name ``Port.port_forwardings`` and
``Port.distributed_port_binding``: backrefs that SQLAlchemy adds to the
Port class only when it configures the ORM's mappers, which it does at the
first query. In a usual deployment something has queried by then (ML2/OVN's
post-fork initialisation, agents' RPC); ML2 with no mechanism driver has
not, so when the first request of a fresh API process lists ports (as Nova
does for every server show), it fails with HTTP 500 "type object 'Port'
has no attribute 'port_forwardings'". Loading the router and
port_forwarding service plugins changes nothing: their models are
imported already, only not configured.
"""

from neutron.wsgi.api import application  # noqa: F401
from sqlalchemy import orm

orm.configure_mappers()
