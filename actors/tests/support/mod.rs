pub mod nats;
