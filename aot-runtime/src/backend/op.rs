//! The op kinds of the backend primitives: [`UnaryOp`], [`BinaryOp`] and
//! [`ReduceOp`]. Every backend takes them, and the eager ops name them from
//! here; each maps to its DSL op ([`aot_ir::OpKind`]), whose definition the
//! kernel stage and every backend compute from.

/// A unary elementwise op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Exp,
    Log,
    Sqrt,
    Rsqrt,
    Abs,
    Sin,
    Cos,
    Tanh,
    Sigmoid,
    Relu,
    Gelu,
    Silu,
    Reciprocal,
    Square,
    Log1p,
    Expm1,
}

impl UnaryOp {
    /// PyTorch's name of the op.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Silu => "silu",
            UnaryOp::Reciprocal => "reciprocal",
            UnaryOp::Square => "square",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Expm1 => "expm1",
        }
    }
}

impl UnaryOp {
    /// The DSL op computing this op.
    pub(crate) fn kind(self) -> aot_ir::OpKind {
        use aot_ir::OpKind as K;
        match self {
            UnaryOp::Neg => K::Neg,
            UnaryOp::Exp => K::Exp,
            UnaryOp::Log => K::Log,
            UnaryOp::Sqrt => K::Sqrt,
            UnaryOp::Rsqrt => K::Rsqrt,
            UnaryOp::Abs => K::Abs,
            UnaryOp::Sin => K::Sin,
            UnaryOp::Cos => K::Cos,
            UnaryOp::Tanh => K::Tanh,
            UnaryOp::Sigmoid => K::Sigmoid,
            UnaryOp::Relu => K::Relu,
            UnaryOp::Gelu => K::Gelu,
            UnaryOp::Silu => K::Silu,
            UnaryOp::Reciprocal => K::Reciprocal,
            UnaryOp::Square => K::Square,
            UnaryOp::Log1p => K::Log1p,
            UnaryOp::Expm1 => K::Expm1,
        }
    }
}

/// A binary elementwise op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Maximum,
    Minimum,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinaryOp {
    /// PyTorch's name of the op.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Eq => "eq",
            BinaryOp::Ne => "ne",
            BinaryOp::Lt => "lt",
            BinaryOp::Le => "le",
            BinaryOp::Gt => "gt",
            BinaryOp::Ge => "ge",
        }
    }

    /// The DSL op of an arithmetic op (comparisons have none in kernels).
    pub(crate) fn kind_of(self) -> Option<aot_ir::OpKind> {
        use aot_ir::OpKind as K;
        Some(match self {
            BinaryOp::Add => K::Add,
            BinaryOp::Sub => K::Sub,
            BinaryOp::Mul => K::Mul,
            BinaryOp::Div => K::Div,
            BinaryOp::Pow => K::Pow,
            BinaryOp::Maximum => K::Maximum,
            BinaryOp::Minimum => K::Minimum,
            _ => return None,
        })
    }

    /// True for the ops whose result is Bool.
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Eq | BinaryOp::Ne | BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge)
    }
}

/// A reduction op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Mean,
    Amax,
}

impl ReduceOp {
    /// PyTorch's name of the op.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Mean => "mean",
            ReduceOp::Amax => "amax",
        }
    }
}
