//! Property-based fuzz targets for Ironplane's parsers and decoders. Everything lives in the
//! integration tests (`tests/`, one file per target); see README.md for what each covers and how
//! to run them longer.
