//! `resource.Quantity` (k8s.io/apimachinery/pkg/api/resource): parsing, comparison, arithmetic
//! and the canonical form Go writes when it marshals one.
//!
//! A quantity is a decimal number with a suffix (`500m`, `1.5Gi`, `12e6`). Go keeps it as a
//! fixed-point value rounded up to nano precision, remembers which of the three suffix families
//! it was written in, and writes it back in canonical form: as large a suffix as loses nothing,
//! no fractional digits (`1.5` → `1500m`, `1536Mi` stays, `1024Mi` → `1Gi`, `0.5` → `500m`).
//! A string that is already canonical and that Go's fast parser accepts is kept byte for byte,
//! quirks included (`+1` and `01` come back as written), because that is what upstream stores.
//!
//! Values are held as a 128-bit mantissa and a power of ten. Go uses arbitrary precision; past
//! 38 significant digits this module rounds the mantissa up instead (no real object holds such
//! numbers; BinarySI values are capped at 2^63-1 as upstream caps them anyway).

use std::cmp::Ordering;
use std::fmt;

/// The suffix family a quantity was written in, which decides how it is written back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `12e6`
    DecimalExponent,
    /// `12Mi` (powers of 1024)
    BinarySI,
    /// `12M` (powers of 1000), and no suffix
    DecimalSI,
}

/// Why a string is not a quantity, with Go's words (`ErrFormatWrong`, `ErrNumeric`, `ErrSuffix`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    FormatWrong,
    Numeric,
    Suffix,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::FormatWrong => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Numeric => "unable to parse numeric part of quantity",
            QuantityError::Suffix => "unable to parse quantity's suffix",
        })
    }
}

impl std::error::Error for QuantityError {}

/// A parsed quantity: `mantissa × 10^exponent`, with trailing zeros of the mantissa moved into
/// the exponent (zero is `0 × 10^0`).
#[derive(Clone, Debug)]
pub struct Quantity {
    mantissa: i128,
    exponent: i32,
    pub format: Format,
    /// The input, when Go keeps it verbatim (its fast path for canonical strings).
    verbatim: Option<String>,
}

/// 2^63-1: the largest BinarySI quantity; larger ones are capped to it, as upstream caps them.
const MAX_ALLOWED: i128 = i64::MAX as i128;
/// No quantity is more precise than 10^-9; finer values are rounded up (away from zero).
const NANO: i32 = -9;
/// Mantissas are kept below this many digits.
const MAX_DIGITS: usize = 38;

/// The scan of Go's `parseQuantityString`: sign, numerator (leading zeros stripped),
/// denominator, and the suffix characters, or an error for trailing garbage.
struct Scanned<'a> {
    positive: bool,
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

fn scan(s: &str) -> Result<Scanned<'_>, QuantityError> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Scanned {
            positive,
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let num = if pos == start { "0" } else { &s[start..pos] };
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let d = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[d..pos];
    }
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && matches!(b[pos], b'-' | b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::FormatWrong);
    }
    Ok(Scanned {
        positive,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// Go's suffix table: (base, exponent, format).
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            // Go parses the exponent as an int64 and keeps its low 32 bits.
            let e: i64 = s[1..].parse().ok()?;
            Some((10, e as i32, Format::DecimalExponent))
        }
        _ => None,
    }
}

/// Moves trailing zeros of `m` into `e`.
fn normalize(mut m: i128, mut e: i32) -> (i128, i32) {
    if m == 0 {
        return (0, 0);
    }
    while m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    (m, e)
}

/// `m × 10^e` rounded away from zero to at most nano precision.
fn round_to_nano(m: i128, e: i32) -> (i128, i32) {
    if e >= NANO || m == 0 {
        return (m, e);
    }
    let shift = (NANO - e) as u32;
    if shift > 38 {
        return (m.signum(), NANO);
    }
    let p = 10i128.pow(shift);
    let q = m / p;
    let rounded = if m % p != 0 { q + m.signum() } else { q };
    (rounded, NANO)
}

fn digits(m: i128) -> usize {
    let mut n = m.unsigned_abs();
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

impl Quantity {
    /// Go's `ParseQuantity`.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::FormatWrong);
        }
        if s == "0" {
            return Ok(Quantity {
                mantissa: 0,
                exponent: 0,
                format: Format::DecimalSI,
                verbatim: Some(s.to_string()),
            });
        }
        let scanned = scan(s)?;
        let (base, exp, mut format) = interpret(scanned.suffix).ok_or(QuantityError::Suffix)?;
        let verbatim = fast_path_keeps(&scanned, base, exp, format).then(|| s.to_string());
        // The digits as one integer; past MAX_DIGITS the rest only rounds up.
        let all = format!("{}{}", scanned.num, scanned.denom);
        let all = all.trim_start_matches('0');
        let (mut m, mut e) = if all.is_empty() {
            (0i128, 0i32)
        } else if all.len() > MAX_DIGITS {
            let (head, tail) = all.split_at(MAX_DIGITS);
            let mut m: i128 = head.parse().map_err(|_| QuantityError::Numeric)?;
            if tail.bytes().any(|c| c != b'0') {
                m += 1;
            }
            (m, tail.len() as i32 - scanned.denom.len() as i32)
        } else {
            let m: i128 = all.parse().map_err(|_| QuantityError::Numeric)?;
            (m, -(scanned.denom.len() as i32))
        };
        if !scanned.positive {
            m = -m;
        }
        if base == 10 {
            e = e.saturating_add(exp);
        } else {
            // × 2^exp: exact in i128 up to the cap, which every larger value hits anyway.
            let factor = 1i128 << exp;
            m = m
                .checked_mul(factor)
                .unwrap_or(m.signum() * MAX_ALLOWED * 10i128.pow(9));
        }
        let (nm, ne) = round_to_nano(m, e);
        (m, e) = normalize(nm, ne);
        if format == Format::BinarySI {
            let q = Quantity {
                mantissa: m,
                exponent: e,
                format,
                verbatim: None,
            };
            if q.abs_cmp_int(MAX_ALLOWED) == Ordering::Greater {
                m = m.signum() * MAX_ALLOWED;
                e = 0;
                (m, e) = normalize(m, e);
            } else if m != 0 && q.abs_cmp_int(1) == Ordering::Less {
                format = Format::DecimalSI;
            }
        }
        Ok(Quantity {
            mantissa: m,
            exponent: e,
            format,
            verbatim,
        })
    }

    /// A quantity of `value × 10^exponent` in the given format (what Go's `NewScaledQuantity`
    /// and friends make).
    pub fn new(value: i64, exponent: i32, format: Format) -> Quantity {
        let (m, e) = normalize(value as i128, exponent);
        Quantity {
            mantissa: m,
            exponent: e,
            format,
            verbatim: None,
        }
    }

    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// -1, 0 or 1.
    pub fn sign(&self) -> i32 {
        self.mantissa.signum() as i32
    }

    /// |self| compared with the integer `n`.
    fn abs_cmp_int(&self, n: i128) -> Ordering {
        let a = Quantity {
            mantissa: self.mantissa.abs(),
            exponent: self.exponent,
            format: self.format,
            verbatim: None,
        };
        let (m, e) = normalize(n, 0);
        a.cmp_parts(m, e)
    }

    fn cmp_parts(&self, m2: i128, e2: i32) -> Ordering {
        let (m1, e1) = (self.mantissa, self.exponent);
        match m1.signum().cmp(&m2.signum()) {
            Ordering::Equal => {}
            other => return other,
        }
        if m1 == 0 {
            return Ordering::Equal;
        }
        // Same sign: compare magnitudes by their leading digit's position first.
        let top1 = digits(m1) as i64 + e1 as i64;
        let top2 = digits(m2) as i64 + e2 as i64;
        let magnitude = if top1 != top2 {
            top1.cmp(&top2)
        } else {
            // Same order of magnitude: align on the smaller exponent; the difference is below
            // 38 digits because both mantissas are.
            let (a, b) = (m1.unsigned_abs(), m2.unsigned_abs());
            if e1 >= e2 {
                (a * 10u128.pow((e1 - e2) as u32)).cmp(&b)
            } else {
                a.cmp(&(b * 10u128.pow((e2 - e1) as u32)))
            }
        };
        if m1 < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }

    /// Go's `CmpInt64`.
    pub fn cmp_int64(&self, n: i64) -> Ordering {
        let (m, e) = normalize(n as i128, 0);
        self.cmp_parts(m, e)
    }

    /// The sum, in this quantity's format (Go's `Add`).
    pub fn add(&self, other: &Quantity) -> Quantity {
        let e = self.exponent.min(other.exponent);
        let scale = |m: i128, from: i32| {
            10i128
                .checked_pow((from - e) as u32)
                .and_then(|p| m.checked_mul(p))
                .unwrap_or(if m < 0 { i128::MIN / 2 } else { i128::MAX / 2 })
        };
        let sum = scale(self.mantissa, self.exponent)
            .saturating_add(scale(other.mantissa, other.exponent));
        let (m, e) = normalize(sum, e);
        Quantity {
            mantissa: m,
            exponent: e,
            format: self.format,
            verbatim: None,
        }
    }

    /// The opposite value, in the same format (Go's `Neg`).
    pub fn neg(&self) -> Quantity {
        Quantity {
            mantissa: -self.mantissa,
            exponent: self.exponent,
            format: self.format,
            verbatim: None,
        }
    }

    /// The value rounded up to an integer multiple of `10^scale` (Go's `ScaledValue`), saturated
    /// to the i64 range.
    pub fn scaled_value(&self, scale: i32) -> i64 {
        let shift = self.exponent - scale;
        let v = if shift >= 0 {
            10i128
                .checked_pow(shift as u32)
                .and_then(|p| self.mantissa.checked_mul(p))
                .unwrap_or(self.mantissa.signum() * i128::MAX)
        } else if -shift > 38 {
            self.mantissa.signum()
        } else {
            let p = 10i128.pow((-shift) as u32);
            let q = self.mantissa / p;
            if self.mantissa % p != 0 {
                q + self.mantissa.signum()
            } else {
                q
            }
        };
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Go's `Value()`: rounded up to an integer.
    pub fn value(&self) -> i64 {
        self.scaled_value(0)
    }

    /// Go's `MilliValue()`.
    pub fn milli_value(&self) -> i64 {
        self.scaled_value(-3)
    }

    /// Whether the value is an integer.
    pub fn is_integer(&self) -> bool {
        self.exponent >= 0 || self.mantissa == 0
    }

    /// The canonical string Go writes (`String()` / `MarshalJSON`): the input when Go kept it,
    /// else the canonical form.
    pub fn canonical(&self) -> String {
        if let Some(v) = &self.verbatim {
            return v.clone();
        }
        self.canonical_form()
    }

    /// Go's `CanonicalizeBytes`, ignoring any verbatim input.
    pub fn canonical_form(&self) -> String {
        if self.mantissa == 0 {
            return "0".into();
        }
        let mut format = self.format;
        if format == Format::BinarySI
            && (self.abs_cmp_int(1024) == Ordering::Less || !self.is_integer())
        {
            format = Format::DecimalSI;
        }
        match format {
            Format::BinarySI => {
                // An integer of at most 2^63-1 (the cap): exact in i128.
                let mut v = self.mantissa * 10i128.pow(self.exponent.max(0) as u32);
                let mut e = 0;
                while v % 1024 == 0 {
                    v /= 1024;
                    e += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                    .get(e)
                    .copied()
                    .unwrap_or("");
                format!("{v}{suffix}")
            }
            Format::DecimalSI | Format::DecimalExponent => {
                let (mut m, mut e) = (self.mantissa, self.exponent);
                // The exponent goes down to a multiple of three; the mantissa takes the zeros.
                while e.rem_euclid(3) != 0 {
                    m = m.saturating_mul(10);
                    e -= 1;
                }
                let suffix = if format == Format::DecimalExponent {
                    if e == 0 {
                        String::new()
                    } else {
                        format!("e{e}")
                    }
                } else {
                    // Go looks the exponent up and writes no suffix when there is none for it.
                    match e {
                        -9 => "n",
                        -6 => "u",
                        -3 => "m",
                        3 => "k",
                        6 => "M",
                        9 => "G",
                        12 => "T",
                        15 => "P",
                        18 => "E",
                        _ => "",
                    }
                    .to_string()
                };
                format!("{m}{suffix}")
            }
        }
    }
}

/// Whether Go's fast path of `ParseQuantity` keeps the input string as the quantity's text.
fn fast_path_keeps(s: &Scanned<'_>, base: u32, exp: i32, format: Format) -> bool {
    let shifted = format!("{}{}", s.num, s.denom);
    match format {
        Format::DecimalSI | Format::DecimalExponent => {
            let precision = 18 - (s.num.len() + s.denom.len()) as i64;
            let scale = exp as i64 - s.denom.len() as i64;
            precision >= 0
                && scale >= NANO as i64
                && shifted.parse::<i64>().is_ok()
                && scale % 3 == 0
                && !shifted.ends_with("000")
                && !shifted.starts_with('0')
        }
        Format::BinarySI => {
            if base != 2 || exp < 0 || !s.denom.is_empty() {
                return false;
            }
            let precision = 15 - s.num.len() as i64 - (exp as f32 * 3.0 / 10.0) as i64 - 1;
            let Ok(value) = shifted.parse::<i64>() else {
                return false;
            };
            precision >= 0
                && value.checked_mul(1i64 << exp).is_some()
                && exp % 10 == 0
                && value & 0x07 != 0
        }
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

/// Quantities compare by value, whatever their format or text (Go's `Cmp`).
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp_parts(other.mantissa, other.exponent)
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Quantity {}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        Quantity::parse(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .canonical()
    }

    #[test]
    fn canonical_forms_as_go_writes_them() {
        // Pairs from upstream's quantity_test.go table and the examples.
        for (input, want) in [
            ("0", "0"),
            ("1000m", "1"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("1.5Gi", "1536Mi"),
            ("1Mi", "1Mi"),
            ("1.23Mi", "1289748480m"),
            ("1000M", "1G"),
            (".001M", "1k"),
            (".0004M", "400"),
            (".000001M", "1"),
            (".000000001M", "1m"),
            (".000000000001M", "1u"),
            ("0.1m", "100u"),
            ("0.0001m", "100n"),
            ("0.0000000001", "1n"),
            ("1e3", "1e3"),
            ("1e4", "10e3"),
            ("12e6", "12e6"),
            ("100m", "100m"),
            ("-1Gi", "-1Gi"),
            ("1023", "1023"),
            ("1.8Gi", "1932735283200m"),
            ("2.7Gi", "2899102924800m"),
            ("0.5Ki", "512"),
            ("1Ki", "1Ki"),
            ("1025Ki", "1025Ki"),
            ("1.1e-3", "1100e-6"),
            ("10Gi", "10Gi"),
            ("8Ei", "9223372036854775807"),
        ] {
            assert_eq!(canon(input), want, "{input}");
        }
    }

    #[test]
    fn go_keeps_canonical_looking_input_verbatim() {
        assert_eq!(canon("+1"), "+1");
        assert_eq!(canon("01"), "01");
        assert_eq!(canon("250m"), "250m");
        assert_eq!(canon("5Gi"), "5Gi");
        assert_eq!(canon("0.0"), "0");
    }

    #[test]
    fn bad_input_gets_gos_errors() {
        assert_eq!(Quantity::parse(""), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1x"), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1Qi"), Err(QuantityError::FormatWrong));
        assert_eq!(Quantity::parse("1ki"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1e"), Err(QuantityError::Suffix));
        assert_eq!(Quantity::parse("1 "), Err(QuantityError::FormatWrong));
        // Go's scanner quirks: a lone sign or dot is zero.
        assert!(Quantity::parse("-").is_ok_and(|q| q.is_zero()));
        assert!(Quantity::parse(".").is_ok_and(|q| q.is_zero()));
    }

    #[test]
    fn comparison_and_arithmetic() {
        let q = |s| Quantity::parse(s).expect("valid");
        assert_eq!(q("1").cmp(&q("1000m")), Ordering::Equal);
        assert_eq!(q("2").cmp(&q("1")), Ordering::Greater);
        assert_eq!(q("-2").cmp(&q("-1")), Ordering::Less);
        assert_eq!(q("1Ki").cmp(&q("1k")), Ordering::Greater);
        assert_eq!(q("1e30").cmp(&q("1E")), Ordering::Greater);
        assert_eq!(q("100m").add(&q("900m")).canonical(), "1");
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("1.5").value(), 2);
        assert_eq!(q("1m").value(), 1);
        assert_eq!(q("-1").sign(), -1);
        assert_eq!(q("64Mi").value(), 64 << 20);
    }
}
