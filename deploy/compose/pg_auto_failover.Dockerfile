# PostgreSQL 15 with pg_auto_failover, for docker-compose.yml's ha profile:
# the official image (Debian) and Debian's pg_auto_failover package.
FROM postgres:15
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15-auto-failover \
 && rm -rf /var/lib/apt/lists/*
USER postgres
