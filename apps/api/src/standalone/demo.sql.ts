/** The demo schema and data of standalone mode, run as the admin role on first start. */
export const DEMO_SQL = `
CREATE SCHEMA IF NOT EXISTS demo;
CREATE TABLE IF NOT EXISTS demo.cities (
  id         int PRIMARY KEY,
  name       text NOT NULL,
  country    text NOT NULL,
  population bigint NOT NULL,
  founded    date,
  location   point
);
INSERT INTO demo.cities VALUES
  (1, 'Tokyo', 'Japan', 37194000, '1457-01-01', point(139.69, 35.69)),
  (2, 'Delhi', 'India', 32941000, NULL, point(77.21, 28.61)),
  (3, 'Shanghai', 'China', 29210000, NULL, point(121.47, 31.23)),
  (4, 'São Paulo', 'Brazil', 22620000, '1554-01-25', point(-46.63, -23.55)),
  (5, 'Mexico City', 'Mexico', 22085000, '1325-06-20', point(-99.13, 19.43)),
  (6, 'Cairo', 'Egypt', 22183000, '0969-07-06', point(31.24, 30.04)),
  (7, 'Lagos', 'Nigeria', 15946000, NULL, point(3.38, 6.52)),
  (8, 'Paris', 'France', 11208000, NULL, point(2.35, 48.86)),
  (9, 'New York', 'United States', 8258000, '1624-01-01', point(-74.01, 40.71)),
  (10, 'Reykjavík', 'Iceland', 139875, '0874-01-01', point(-21.94, 64.15))
ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS demo.orders (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  city_id    int NOT NULL REFERENCES demo.cities (id),
  placed_at  timestamptz NOT NULL,
  amount     numeric(12, 2) NOT NULL,
  items      jsonb NOT NULL
);
INSERT INTO demo.orders (city_id, placed_at, amount, items)
SELECT 1 + (g % 10), timestamptz '2026-01-01 00:00:00+00' + g * interval '37 minutes',
       round((10 + (g * 7919) % 500)::numeric / 3, 2),
       jsonb_build_object('sku', 'SKU-' || (g % 25), 'qty', 1 + g % 4)
  FROM generate_series(1, 1000) g
 WHERE NOT EXISTS (SELECT 1 FROM demo.orders);
`;
