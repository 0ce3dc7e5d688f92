#!/usr/bin/env node
import { exitWhenDrained, runSluice } from './sluice';

// `sluice` of the @sluice/cli package: the client commands only (see runSluice).
void runSluice(process.argv.slice(2)).then(exitWhenDrained);
