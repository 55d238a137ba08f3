module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
  func.func @main(%arg0: tensor<0x2x4xf32>, %arg1: tensor<0x4x3xf32>) -> tensor<0x2x3xf32> {
    %0 = "kiln.matmul"(%arg0, %arg1) : (tensor<0x2x4xf32>, tensor<0x4x3xf32>) -> tensor<0x2x3xf32>
    return %0 : tensor<0x2x3xf32>
  }
}
