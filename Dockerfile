# syntax=docker/dockerfile:1
# The Inbound Receivables Service as an image (issue 13; README "Production"; decisions in docs/decisions.md,
# "Deployment"). Two stages: `build` compiles TypeScript with the dev dependencies; `runtime` holds only the
# production dependencies, dist/ and the CLI launcher, runs as the unprivileged `node` user, and has no secret
# in it: every credential comes from the environment at run time (compose.yaml). test/docs/deployment.test.ts
# checks these rules and runs the runtime stage's contents without Docker.

# `--workspaces=false`: the image is the service alone; the SDK workspace (packages/sdk) is published on its own.
# `--omit=optional` (runtime): the optional packages are Biome's linter binary and pg-cloudflare (for Cloudflare
# Workers); neither runs in the service. `--ignore-scripts` (runtime): no production dependency needs an install
# script (the one that has one, @scarf/scarf, only sends analytics).

# ---- build: dev dependencies; the service's part of `npm run build` (tsc, then the SQL migrations beside it) ----
# Not `npm run build` itself, which also builds the SDK workspace, absent here.
FROM node:24.21-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --workspaces=false --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npx tsc -b tsconfig.build.json && cp -R src/store/migrations dist/store/migrations

# ---- runtime: production dependencies and dist/ only ----
FROM node:24.21-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional --workspaces=false --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
# The guide's Markdown (/docs/guide renders it at its first request).
COPY docs/guide ./docs/guide
# The embedded store's directory (used only without DATABASE_URL), writable by the service user.
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080
# Ready means the store answers: /readyz is 503 while it does not, and while the service is stopping.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/readyz').then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
# Exec form, node as PID 1 with no shell or npm in between: SIGTERM reaches the service itself, which stops
# taking requests, finishes those in flight, hands back batch leases, finishes the webhook deliveries it is
# sending and closes the store within 20 s (give it more: compose.yaml sets stop_grace_period 30s).
STOPSIGNAL SIGTERM
CMD ["node", "--enable-source-maps", "dist/main.js"]
