-- The pgtools demo dataset: a small online shop. Load (load.go) runs this in
-- an empty database, then fills the tables. The comments below are what
-- describe_schema shows an agent, so they are written for a reader who has
-- never seen this database.

CREATE TABLE customers (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL,
    email      text NOT NULL UNIQUE,
    country    text,
    created_at timestamptz NOT NULL DEFAULT now(),
    vip        boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE customers IS 'People who have an account in the shop; one row per account.';
COMMENT ON COLUMN customers.email IS 'Login and contact address; unique, stored in lower case.';
COMMENT ON COLUMN customers.country IS 'ISO 3166-1 alpha-2 country code of the billing address; NULL if never given.';
COMMENT ON COLUMN customers.vip IS 'True for customers in the loyalty programme (free shipping, early access).';

CREATE TABLE products (
    id         serial PRIMARY KEY,
    sku        text NOT NULL UNIQUE,
    name       text NOT NULL,
    price      numeric(10,2) NOT NULL CHECK (price >= 0),
    tags       text[] NOT NULL DEFAULT '{}',
    attributes jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE products IS 'The catalogue: everything the shop sells, including discontinued items.';
COMMENT ON COLUMN products.price IS 'Current list price in EUR, VAT included.';
COMMENT ON COLUMN products.attributes IS 'Free-form product details, e.g. {"color": "red", "weight_g": 350, "in_stock": true}.';

CREATE TABLE orders (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    customer_id bigint NOT NULL REFERENCES customers (id),
    status      text NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'paid', 'shipped', 'cancelled')),
    total       numeric(12,2) NOT NULL DEFAULT 0,
    placed_at   timestamptz NOT NULL DEFAULT now(),
    note        text
);
COMMENT ON TABLE orders IS 'One row per checkout; the purchased products are in order_items.';
COMMENT ON COLUMN orders.status IS 'pending (awaiting payment), paid, shipped or cancelled.';
COMMENT ON COLUMN orders.total IS 'Sum of quantity * unit_price over the order''s items, in EUR.';
CREATE INDEX orders_customer_id_idx ON orders (customer_id);
CREATE INDEX orders_placed_at_idx ON orders (placed_at);

CREATE TABLE order_items (
    order_id   bigint NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    product_id integer NOT NULL REFERENCES products (id),
    quantity   integer NOT NULL CHECK (quantity > 0),
    unit_price numeric(10,2) NOT NULL,
    PRIMARY KEY (order_id, product_id)
);
COMMENT ON TABLE order_items IS 'The lines of each order: which product, how many, at what price.';
COMMENT ON COLUMN order_items.unit_price IS 'Price per unit in EUR when the order was placed (list prices change later).';

CREATE TABLE events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       text NOT NULL,
    payload    jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE events IS 'Clickstream of the web shop (page views, searches, cart changes, errors); large, append-only.';
COMMENT ON COLUMN events.kind IS 'page_view, click, search, add_to_cart, checkout or error.';
COMMENT ON COLUMN events.payload IS 'Event details; keys depend on kind (path, customer_id, product_id, query, ...).';
