module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
  func.func @main(%arg0: tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, %arg1: tensor<3xi64>, %arg2: tensor<?x6xi1, #kiln.tensor<[batch, 6]>>) -> (tensor<8xf32>, tensor<1x4xf32>, tensor<4xi64>, tensor<8x4xi32>) {
    %0 = "kiln.weight"() {name = "w"} : () -> tensor<6x6xf32> loc("/work/main/tests/ir/write_samples.cpp":40:34)
    %1 = "kiln.weight"() {name = "gamma"} : () -> tensor<6xf32> loc("/work/main/tests/ir/write_samples.cpp":41:38)
    %2 = "kiln.weight"() {name = "beta"} : () -> tensor<6xf32> loc("/work/main/tests/ir/write_samples.cpp":42:37)
    %3 = "kiln.rms_norm"(%arg0, %1) {eps = 1.0e-06} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<6xf32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":43:82)
    %4 = "kiln.matmul"(%arg0, %0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<6x6xf32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":43:45)
    %5 = "kiln.layer_norm"(%4, %1, %2) {eps = 1.0e-05} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<6xf32>, tensor<6xf32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":43:32)
    %6 = "kiln.add"(%5, %3) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":43:91)
    %7 = "kiln.constant"() {value = dense<"0x0000803F"> : tensor<f32>} : () -> tensor<f32> loc("/work/main/tests/ir/write_samples.cpp":44:82)
    %8 = "kiln.fused"(%6, %7, %arg2) {callee = @fused_0} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<f32>, tensor<?x6xi1, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":44:20)
    %9 = "kiln.constant"() {value = dense<"0x0000803F"> : tensor<f32>} : () -> tensor<f32> loc("/work/main/tests/ir/write_samples.cpp":45:81)
    %10 = "kiln.constant"() {value = dense<"0x00000040"> : tensor<f32>} : () -> tensor<f32> loc("/work/main/tests/ir/write_samples.cpp":45:18)
    %11 = "kiln.fused"(%8, %9, %10) {callee = @fused_1} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<f32>, tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:84)
    %12 = "kiln.constant"() {value = dense<"0x0000803F"> : tensor<f32>} : () -> tensor<f32> loc("/work/main/tests/ir/write_samples.cpp":46:84)
    %13 = "kiln.fused"(%11, %12) {callee = @fused_2} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:22)
    %14:2 = "kiln.split"(%13) {axis = 1, sizes = [2, 4]} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> (tensor<?x2xf32, #kiln.tensor<[batch, 2]>>, tensor<?x4xf32, #kiln.tensor<[batch, 4]>>) loc("/work/main/tests/ir/write_samples.cpp":47:50)
    %15 = "kiln.neg"(%14#0) : (tensor<?x2xf32, #kiln.tensor<[batch, 2]>>) -> tensor<?x2xf32, #kiln.tensor<[batch, 2]>> loc("/work/main/tests/ir/write_samples.cpp":48:54)
    %16 = "kiln.concat"(%14#1, %15) {axis = 1} : (tensor<?x4xf32, #kiln.tensor<[batch, 4]>>, tensor<?x2xf32, #kiln.tensor<[batch, 2]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":48:33)
    %17 = "kiln.transpose"(%16) {perm = [0, 1]} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":49:73)
    %18 = "kiln.log_softmax"(%17) {axis = 0} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":49:59)
    %19 = "kiln.softmax"(%16) {axis = -1} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":49:27)
    %20 = "kiln.add"(%19, %18) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":49:92)
    %21 = "kiln.gather"(%20, %arg1) {axis = 0} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<3xi64>) -> tensor<3x6xf32> loc("/work/main/tests/ir/write_samples.cpp":50:37)
    %22 = "kiln.transpose"(%21) {perm = [1, 0]} : (tensor<3x6xf32>) -> tensor<6x3xf32> loc("/work/main/tests/ir/write_samples.cpp":51:54)
    %23 = "kiln.reshape"(%22) {shape = #kiln.shape<[18]>} : (tensor<6x3xf32>) -> tensor<18xf32> loc("/work/main/tests/ir/write_samples.cpp":51:38)
    %24 = "kiln.slice"(%23) {starts = [1], steps = [2], stops = [17]} : (tensor<18xf32>) -> tensor<8xf32> loc("/work/main/tests/ir/write_samples.cpp":52:38)
    %25 = "kiln.reshape"(%24) {shape = #kiln.shape<[8, 1]>} : (tensor<8xf32>) -> tensor<8x1xf32> loc("/work/main/tests/ir/write_samples.cpp":53:57)
    %26 = "kiln.broadcast_to"(%25) {shape = #kiln.shape<[8, 4]>} : (tensor<8x1xf32>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":53:43)
    %27 = "kiln.reshape"(%24) {shape = #kiln.shape<[8, 1]>} : (tensor<8xf32>) -> tensor<8x1xf32> loc("/work/main/tests/ir/write_samples.cpp":55:57)
    %28 = "kiln.constant"() {value = dense<"0x0000003F"> : tensor<f32>} : () -> tensor<f32> loc("/work/main/tests/ir/write_samples.cpp":55:89)
    %29 = "kiln.mul"(%27, %28) : (tensor<8x1xf32>, tensor<f32>) -> tensor<8x1xf32> loc("/work/main/tests/ir/write_samples.cpp":55:89)
    %30 = "kiln.broadcast_to"(%29) {shape = #kiln.shape<[8, 4]>} : (tensor<8x1xf32>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":55:43)
    %31 = "kiln.fused"(%26, %30) {callee = @fused_3} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":59:67)
    %32 = "kiln.fused"(%26, %30) {callee = @fused_4} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xi32> loc("/work/main/tests/ir/write_samples.cpp":62:61)
    %33 = "kiln.argmax"(%26) {axis = 0, keepdim = false} : (tensor<8x4xf32>) -> tensor<4xi64> loc("/work/main/tests/ir/write_samples.cpp":62:40)
    %34 = "kiln.reduce_min"(%26) {axes = [0], keepdim = true} : (tensor<8x4xf32>) -> tensor<1x4xf32> loc("/work/main/tests/ir/write_samples.cpp":61:66)
    %35 = "kiln.reduce_max"(%26) {axes = [0], keepdim = true} : (tensor<8x4xf32>) -> tensor<1x4xf32> loc("/work/main/tests/ir/write_samples.cpp":61:37)
    %36 = "kiln.sub"(%35, %34) : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32> loc("/work/main/tests/ir/write_samples.cpp":61:82)
    %37 = "kiln.reduce_mean"(%31) {axes = [1], keepdim = false} : (tensor<8x4xf32>) -> tensor<8xf32> loc("/work/main/tests/ir/write_samples.cpp":60:61)
    %38 = "kiln.reduce_sum"(%26) {axes = [1], keepdim = false} : (tensor<8x4xf32>) -> tensor<8xf32> loc("/work/main/tests/ir/write_samples.cpp":60:37)
    %39 = "kiln.add"(%38, %37) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> loc("/work/main/tests/ir/write_samples.cpp":60:72)
    return %39, %36, %33, %32 : tensor<8xf32>, tensor<1x4xf32>, tensor<4xi64>, tensor<8x4xi32>
  }
  func.func private @fused_0(%arg0: tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, %arg1: tensor<f32>, %arg2: tensor<?x6xi1, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> {
    %0 = "kiln.abs"(%arg0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":44:76)
    %1 = "kiln.add"(%0, %arg1) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":44:82)
    %2 = "kiln.silu"(%arg0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":44:60)
    %3 = "kiln.div"(%2, %1) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":44:85)
    %4 = "kiln.gelu"(%arg0) {approximate = "tanh"} : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":44:37)
    %5 = "kiln.where"(%arg2, %4, %3) : (tensor<?x6xi1, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":44:20)
    return %5 : tensor<?x6xf32, #kiln.tensor<[batch, 6]>>
  }
  func.func private @fused_1(%arg0: tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, %arg1: tensor<f32>, %arg2: tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> {
    %0 = "kiln.tanh"(%arg0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:74)
    %1 = "kiln.exp"(%0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:63)
    %2 = "kiln.add"(%1, %arg1) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:81)
    %3 = "kiln.log"(%2) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:53)
    %4 = "kiln.sigmoid"(%arg0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:32)
    %5 = "kiln.pow"(%4, %arg2) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:18)
    %6 = "kiln.sub"(%5, %3) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":45:84)
    return %6 : tensor<?x6xf32, #kiln.tensor<[batch, 6]>>
  }
  func.func private @fused_2(%arg0: tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, %arg1: tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> {
    %0 = "kiln.neg"(%arg0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:91)
    %1 = "kiln.mul"(%arg0, %arg0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:80)
    %2 = "kiln.add"(%1, %arg1) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<f32>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:84)
    %3 = "kiln.rsqrt"(%2) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:75)
    %4 = "kiln.minimum"(%3, %0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:63)
    %5 = "kiln.relu"(%arg0) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:44)
    %6 = "kiln.sqrt"(%5) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:33)
    %7 = "kiln.maximum"(%6, %4) : (tensor<?x6xf32, #kiln.tensor<[batch, 6]>>, tensor<?x6xf32, #kiln.tensor<[batch, 6]>>) -> tensor<?x6xf32, #kiln.tensor<[batch, 6]>> loc("/work/main/tests/ir/write_samples.cpp":46:22)
    return %7 : tensor<?x6xf32, #kiln.tensor<[batch, 6]>>
  }
  func.func private @fused_3(%arg0: tensor<8x4xf32>, %arg1: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %0 = "kiln.le"(%arg0, %arg1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xi1> loc("/work/main/tests/ir/write_samples.cpp":59:45)
    %1 = "kiln.cast"(%0) {dtype = f32} : (tensor<8x4xi1>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":59:36)
    %2 = "kiln.ne"(%arg1, %arg0) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xi1> loc("/work/main/tests/ir/write_samples.cpp":58:52)
    %3 = "kiln.cast"(%2) {dtype = f32} : (tensor<8x4xi1>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":58:36)
    %4 = "kiln.eq"(%arg0, %arg1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xi1> loc("/work/main/tests/ir/write_samples.cpp":57:48)
    %5 = "kiln.cast"(%4) {dtype = f32} : (tensor<8x4xi1>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":57:36)
    %6 = "kiln.add"(%5, %3) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":58:82)
    %7 = "kiln.add"(%6, %1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32> loc("/work/main/tests/ir/write_samples.cpp":59:67)
    return %7 : tensor<8x4xf32>
  }
  func.func private @fused_4(%arg0: tensor<8x4xf32>, %arg1: tensor<8x4xf32>) -> tensor<8x4xi32> {
    %0 = "kiln.ge"(%arg0, %arg1) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xi1> loc("/work/main/tests/ir/write_samples.cpp":62:70)
    %1 = "kiln.cast"(%0) {dtype = i32} : (tensor<8x4xi1>) -> tensor<8x4xi32> loc("/work/main/tests/ir/write_samples.cpp":62:61)
    return %1 : tensor<8x4xi32>
  }
}
